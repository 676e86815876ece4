//! Timing profiles: named sets of `[timing]` values for where a cluster runs
//! (docs/configuration.md, "Timing profiles"). `timing.profile = "shared"` (or
//! `--timing-profile shared`) gives the profile's heartbeat, follower lease and claim lease;
//! any of the three given as well overrides the profile's. A profile is only a starting point:
//! the values in force pass the same margins as any others (`config/validate.rs`), and
//! `electd_timing_*` metrics export them whatever their source.
//!
//! The figures behind each profile (leader changes an hour of clusters throttled by a cgroup
//! CPU quota, failover percentiles) are in docs/benchmarks.md, "Timing profiles".

use super::Timing;

/// A named set of timings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimingProfile {
    /// A quiet LAN with dedicated cores: heartbeat 30 ms, follower lease 150 ms, claim 120 ms
    /// (etcd at `--heartbeat-interval 30 --election-timeout 150`). The default.
    Lan,
    /// Shared or CPU-limited hosts (Kubernetes CPU limits, burstable VMs, noisy neighbours):
    /// heartbeat 100 ms, follower lease 1000 ms, claim 800 ms (etcd's own defaults). A
    /// throttled period (100 ms under the CFS default) or a pause of a few hundred ms drops no
    /// claim; failover takes about a second.
    Shared,
}

impl TimingProfile {
    /// Every profile, the default first.
    pub const ALL: [TimingProfile; 2] = [TimingProfile::Lan, TimingProfile::Shared];

    /// Its name in the config, on the command line and in metrics.
    pub fn name(self) -> &'static str {
        match self {
            TimingProfile::Lan => "lan",
            TimingProfile::Shared => "shared",
        }
    }

    /// The profile named `name`, or an error that lists the names.
    pub fn parse(name: &str) -> Result<TimingProfile, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "timing.profile ({name:?}) must be one of {}",
                    names.join(", ")
                )
            })
    }

    /// The profile's timings (`lease_ms` 0: the follower lease less a fifth).
    pub const fn timing(self) -> Timing {
        match self {
            TimingProfile::Lan => Timing {
                heartbeat_ms: 30,
                follower_lease_ms: 150,
                lease_ms: 0,
            },
            TimingProfile::Shared => Timing {
                heartbeat_ms: 100,
                follower_lease_ms: 1000,
                lease_ms: 0,
            },
        }
    }

    /// The profile whose timings `t` are (claim leases compared as in force), if any.
    pub fn of(t: &Timing) -> Option<TimingProfile> {
        Self::ALL.into_iter().find(|p| {
            let q = p.timing();
            q.heartbeat_ms == t.heartbeat_ms
                && q.follower_lease_ms == t.follower_lease_ms
                && q.effective_lease_ms() == t.effective_lease_ms()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// Every profile passes the margins the safety argument states, on its own and under
    /// every mode's rules (a config of three members).
    #[test]
    fn every_profile_passes_the_timing_rules() {
        for p in TimingProfile::ALL {
            let text = format!(
                "id = 1\ncluster_id = \"t\"\ndata_dir = \"/tmp/x\"\ninsecure = true\n\
                 peers = [{{ id = 1, addr = \"127.0.0.1:1\" }}, {{ id = 2, addr = \
                 \"127.0.0.1:2\" }}, {{ id = 3, addr = \"127.0.0.1:3\" }}]\n\
                 [timing]\nprofile = \"{}\"\n",
                p.name()
            );
            let cfg: Config = toml::from_str(&text).unwrap();
            cfg.validate()
                .unwrap_or_else(|e| panic!("{}: {e}", p.name()));
            assert_eq!(cfg.timing, p.timing());
            assert_eq!(TimingProfile::of(&cfg.timing), Some(p));
            assert_eq!(TimingProfile::parse(p.name()), Ok(p));
        }
        assert_eq!(TimingProfile::Lan.timing(), Timing::default());
    }

    #[test]
    fn an_unknown_profile_is_refused_naming_the_field_and_the_names() {
        let e = TimingProfile::parse("wan").unwrap_err();
        assert_eq!(e, "timing.profile (\"wan\") must be one of lan, shared");
    }

    /// A profile given by a flag (or the environment) wins over the file's timings, as every
    /// flag wins over the file; a timing flag beside it still overrides it.
    #[test]
    fn a_profile_flag_wins_over_the_files_timings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "id = 1\ndata_dir = \"d\"\ninsecure = true\npeers = [{ id = 1, addr = \
             \"127.0.0.1:1\" }]\n[timing]\nheartbeat_ms = 30\nfollower_lease_ms = 150\n",
        )
        .unwrap();
        let flags = |text: &str| toml::from_str::<toml::Table>(text).unwrap();
        let cfg = Config::resolve(Some(&path), flags("[timing]\nprofile = \"shared\"")).unwrap();
        assert_eq!(cfg.timing, TimingProfile::Shared.timing());
        let cfg = Config::resolve(
            Some(&path),
            flags("[timing]\nprofile = \"shared\"\nheartbeat_ms = 50"),
        )
        .unwrap();
        assert_eq!(
            (cfg.timing.heartbeat_ms, cfg.timing.follower_lease_ms),
            (50, 1000)
        );
        let cfg = Config::resolve(Some(&path), flags("[timing]\nheartbeat_ms = 40")).unwrap();
        assert_eq!(
            (cfg.timing.heartbeat_ms, cfg.timing.follower_lease_ms),
            (40, 150)
        );
    }

    /// A field given beside a profile overrides that field only; timings that match no
    /// profile are no profile's.
    #[test]
    fn fields_override_the_profile() {
        let t: Timing = toml::from_str::<toml::Table>("profile = \"shared\"\nheartbeat_ms = 50")
            .unwrap()
            .try_into()
            .unwrap();
        assert_eq!((t.heartbeat_ms, t.follower_lease_ms), (50, 1000));
        assert_eq!(TimingProfile::of(&t), None);
        let same: Timing = toml::from_str::<toml::Table>("follower_lease_ms = 150\nlease_ms = 120")
            .unwrap()
            .try_into()
            .unwrap();
        assert_eq!(TimingProfile::of(&same), Some(TimingProfile::Lan));
    }
}
