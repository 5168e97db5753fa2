//! `platter`: the coordinator and the operator's CLI; see `platter::cli`.

fn main() {
    std::process::exit(platter::cli::main());
}
