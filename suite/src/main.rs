//! The `stratlab` binary: parse the command line, run the command, map failures to exit codes.

use std::process::ExitCode;

use clap::Parser;
use stratlab::cli::Cli;
use stratlab::{commands, exit};

fn main() -> ExitCode {
    stratlab_strategies::heap::keep_freed_memory();
    let cli = Cli::parse();
    if cli.command.only_prints() {
        // SAFETY: restores the default disposition of one signal before any thread starts;
        // no handler runs Rust code.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match commands::execute(cli.command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(exit::exit_code(&error))
        }
    }
}
