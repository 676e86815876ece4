//! Where the node binary is: the lab runs `electd` processes but is not `electd` itself.

use std::path::PathBuf;

/// The `electd` binary the lab starts nodes from: `$ELECTD_BIN` when set, else the `electd`
/// beside the running program (the lab binary in `target/<profile>/`) or one directory up (a
/// test executable in `target/<profile>/deps/`). The error says how to build it.
pub fn electd_bin() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("ELECTD_BIN").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("ELECTD_BIN={} is not a file", path.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let dir = exe.parent().ok_or("this program has no directory")?;
    let found = [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join("electd"))
        .find(|p| p.is_file());
    found.ok_or_else(|| {
        format!(
            "no electd binary beside {} (build it: cargo build --bin electd, or set ELECTD_BIN)",
            exe.display()
        )
    })
}
