//! The kernel fault layer: iptables DROP rules on loopback, in a chain of the suite's own.
//!
//! Each node of a kernel-layer run binds its own loopback address and sends from it, so a rule
//! `-s A -d B -j DROP` drops A→B only (one-way cuts come free) and
//! `-m statistic --mode random --probability p` gives loss. The chain is `ELECTD<pid>`, jumped
//! to from INPUT, flushed when created and deleted (with its jump) when dropped. A runner that
//! was killed cannot drop its chain, so creating one first removes every `ELECTD<pid>` chain
//! whose process is gone ([`sweep_stale`]).

use std::process::Command;

/// Why the kernel layer's tool is missing here: not root, or no iptables program. Only this is
/// a reason to skip a kernel-layer run or test; an iptables that is there and fails as root
/// fails the run (then [`Chain::create`] says why).
pub fn missing() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("kernel layer needs root (iptables)".into());
    }
    match Command::new("iptables").arg("--version").output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some("kernel layer needs iptables, which is not installed".into())
        }
        _ => None,
    }
}

/// Why the kernel layer cannot run here: [`missing`], or an iptables that does not work. For
/// measurements that go without it (the cost benchmark's peer traffic).
pub fn unavailable() -> Option<String> {
    if let Some(why) = missing() {
        return Some(why);
    }
    match Command::new("iptables").arg("-L").arg("-n").output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "iptables does not work here: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("no iptables: {e}")),
    }
}

fn ipt(args: &[&str]) -> Result<(), String> {
    let out = Command::new("iptables")
        .args(["-w", "5"])
        .args(args)
        .output()
        .map_err(|e| format!("iptables: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iptables {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The suite's own chain; removed with its rules when dropped.
pub struct Chain {
    name: String,
}

/// The pid in a chain name `ELECTD<pid>`, if it is one of ours.
fn chain_pid(name: &str) -> Option<u32> {
    name.strip_prefix("ELECTD")?.parse().ok()
}

/// Removes the chains (and their jumps from INPUT) of runners that no longer run; returns
/// their names.
pub fn sweep_stale() -> Vec<String> {
    let Ok(out) = Command::new("iptables").args(["-w", "5", "-S"]).output() else {
        return Vec::new();
    };
    let mut gone = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.strip_prefix("-N ") else {
            continue;
        };
        let Some(pid) = chain_pid(name) else {
            continue;
        };
        if pid == std::process::id() || std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        remove(name);
        gone.push(name.to_string());
    }
    gone
}

fn remove(name: &str) {
    // A jump may have been inserted more than once; bounded by the rule count.
    for _ in 0..64 {
        if ipt(&["-D", "INPUT", "-j", name]).is_err() {
            break;
        }
    }
    let _ = ipt(&["-F", name]);
    let _ = ipt(&["-X", name]);
}

impl Chain {
    pub fn create() -> Result<Chain, String> {
        for name in sweep_stale() {
            eprintln!("removed the iptables chain {name} of a runner that is gone");
        }
        let name = format!("ELECTD{}", std::process::id());
        let _ = ipt(&["-N", &name]);
        ipt(&["-F", &name])?;
        let _ = ipt(&["-D", "INPUT", "-j", &name]);
        ipt(&["-I", "INPUT", "1", "-j", &name])?;
        Ok(Chain { name })
    }

    /// Replaces every rule: `cuts` are (source ip, destination ip) pairs dropped entirely;
    /// `loss` drops that share of packets between any two of `ips`.
    pub fn set(&self, cuts: &[(String, String)], loss: f64, ips: &[String]) -> Result<(), String> {
        ipt(&["-F", &self.name])?;
        for (s, d) in cuts {
            ipt(&["-A", &self.name, "-s", s, "-d", d, "-j", "DROP"])?;
        }
        if loss > 0.0 {
            let p = format!("{loss:.4}");
            for s in ips {
                for d in ips {
                    if s != d {
                        ipt(&[
                            "-A",
                            &self.name,
                            "-s",
                            s,
                            "-d",
                            d,
                            "-m",
                            "statistic",
                            "--mode",
                            "random",
                            "--probability",
                            &p,
                            "-j",
                            "DROP",
                        ])?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Replaces every rule with counting rules (the cost benchmark): each entry of `matches`
    /// (iptables match arguments) becomes a rule that counts the packets it matches and lets
    /// them pass; the counters start at 0.
    pub fn count(&self, matches: &[Vec<String>]) -> Result<(), String> {
        ipt(&["-F", &self.name])?;
        for m in matches {
            let mut args = vec!["-A", self.name.as_str()];
            args.extend(m.iter().map(String::as_str));
            args.extend(["-j", "RETURN"]);
            ipt(&args)?;
        }
        ipt(&["-Z", &self.name])
    }

    /// (packets, bytes) each rule counted, in the order of the rules.
    pub fn counters(&self) -> Result<Vec<(u64, u64)>, String> {
        let out = Command::new("iptables")
            .args(["-w", "5", "-L", &self.name, "-v", "-x", "-n"])
            .output()
            .map_err(|e| format!("iptables: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "iptables -L {}: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(parse_counters(&String::from_utf8_lossy(&out.stdout)))
    }
}

/// The (packets, bytes) columns of `iptables -L CHAIN -v -x -n`, a pair per rule.
fn parse_counters(listing: &str) -> Vec<(u64, u64)> {
    listing
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect()
}

impl Drop for Chain {
    fn drop(&mut self) {
        remove(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_a_pair_per_rule() {
        let listing = "Chain ELECTD7 (1 references)\n\
            \x20   pkts      bytes target     prot opt in     out     source               destination\n\
            \x20     12     3456 RETURN     6    --  *      *       0.0.0.0/0            127.1.2.0/24         tcp dpt:7100\n\
            \x20      0        0 RETURN     6    --  *      *       127.1.2.0/24         0.0.0.0/0            tcp spt:7100\n";
        assert_eq!(parse_counters(listing), vec![(12, 3456), (0, 0)]);
    }

    #[test]
    fn chain_names() {
        assert_eq!(chain_pid("ELECTD123"), Some(123));
        assert_eq!(chain_pid("ELECTD"), None);
        assert_eq!(chain_pid("ELECTDx1"), None);
        assert_eq!(chain_pid("DOCKER"), None);
    }

    /// A chain left by a dead runner (with its jump) is removed; a live one is kept.
    #[test]
    fn sweep_removes_only_dead_runners_chains() {
        if let Some(why) = missing() {
            crate::skip::skip(&why);
            return;
        }
        // A pid that is not running: a child we started and reaped.
        let mut child = Command::new("true").spawn().expect("spawn true");
        let dead = child.id();
        child.wait().expect("wait");
        let stale = format!("ELECTD{dead}");
        ipt(&["-N", &stale]).expect("create stale chain");
        ipt(&["-I", "INPUT", "1", "-j", &stale]).expect("jump");
        let own = Chain::create().expect("own chain");
        let listing = || {
            let out = Command::new("iptables").args(["-w", "5", "-S"]).output();
            String::from_utf8_lossy(&out.expect("iptables -S").stdout).to_string()
        };
        let after = listing();
        assert!(!after.contains(&format!("-N {stale}\n")), "{after}");
        assert!(!after.contains(&format!("-j {stale}\n")), "{after}");
        assert!(after.contains(&format!("-N {}", own.name)), "{after}");
        let name = own.name.clone();
        drop(own);
        assert!(!listing().contains(&format!("-N {name}")));
    }
}
