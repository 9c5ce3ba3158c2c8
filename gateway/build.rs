//! Embeds every `sql/*.sql` file, sorted by name, as `SQL_FILES` so the
//! binary carries its stored functions (see src/db.rs), and
//! `sql/citus/functions.sql` as `CITUS_FUNCTIONS`. Each name starts
//! with a two-digit number: the order is explicit, never an accident of
//! the alphabet.

use std::path::{Path, PathBuf};
use std::{env, fs};

fn main() {
    println!("cargo:rerun-if-changed=../sql");
    println!("cargo:rerun-if-changed=../migrations");

    let sql_dir = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("../sql");
    let mut files: Vec<PathBuf> = fs::read_dir(&sql_dir)
        .map(|dir| dir.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default(); // no sql/ yet: nothing to embed
    files.retain(|p| p.extension().is_some_and(|e| e == "sql") && p.is_file());
    files.sort();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy();
        let numbered = name.len() > 3
            && name.as_bytes()[..2].iter().all(u8::is_ascii_digit)
            && name.as_bytes()[2] == b'_';
        assert!(
            numbered,
            "sql/{name}: file names start with NN_ (their load order)"
        );
    }

    let mut out = String::from("pub const SQL_FILES: &[(&str, &str)] = &[\n");
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy();
        let full = path.canonicalize().unwrap();
        out += &format!(
            "    ({name:?}, include_str!({:?})),\n",
            full.display().to_string()
        );
    }
    out += "];\n";
    // Applied after them on a Citus coordinator only (src/db.rs).
    let citus = sql_dir.join("citus/functions.sql").canonicalize().unwrap();
    out += &format!(
        "pub const CITUS_FUNCTIONS: &str = include_str!({:?});\n",
        citus.display().to_string()
    );
    let dest = Path::new(&env::var("OUT_DIR").unwrap()).join("sql_files.rs");
    fs::write(dest, out).unwrap();
}
