//! The kernel fault layer: iptables DROP rules on loopback, in a chain of the suite's own.
//!
//! Each node of a kernel-layer run binds its own loopback address and sends from it, so a rule
//! `-s A -d B -j DROP` drops A→B only (one-way cuts come free) and
//! `-m statistic --mode random --probability p` gives loss. The chain is `ELECTD<pid>`, jumped
//! to from INPUT, flushed when created and deleted (with its jump) when dropped.

use std::process::Command;

/// Why the kernel layer cannot run here (reported as a skip, never as a pass).
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("kernel layer needs root (iptables)".into());
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

impl Chain {
    pub fn create() -> Result<Chain, String> {
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
}

impl Drop for Chain {
    fn drop(&mut self) {
        let _ = ipt(&["-D", "INPUT", "-j", &self.name]);
        let _ = ipt(&["-F", &self.name]);
        let _ = ipt(&["-X", &self.name]);
    }
}
