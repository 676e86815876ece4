//! The cluster's generated secrets: the admin token and the cluster secret, kept under `run/`
//! (mode 0600) and handed to nodes through their environment, never their command line.

use std::fs;

use super::dir::{io, Cluster, CtlError};

impl Cluster {
    /// Generates the admin token (`run/admin-token`) and the cluster secret
    /// (`run/cluster-secret`) unless they exist; nodes started afterwards get both through
    /// their environment, never on their command line.
    pub fn ensure_secrets(&self) -> Result<(), CtlError> {
        for name in ["admin-token", "cluster-secret"] {
            let path = self.run.join(name);
            if fs::metadata(&path).map(|m| m.len() > 0).unwrap_or(false) {
                continue;
            }
            let mut bytes = [0u8; 24];
            rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
            fs::write(&path, hex::encode(bytes) + "\n").map_err(io(&path))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(&path, fs::Permissions::from_mode(0o600));
        }
        Ok(())
    }

    pub fn admin_token(&self) -> Option<String> {
        fs::read_to_string(self.run.join("admin-token"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }
}
