//! The `stratlab` binary: parse the command line, run the command, map failures to exit codes.

use std::process::ExitCode;

use clap::Parser;
use stratlab::cli::Cli;
use stratlab::{commands, exit};

fn main() -> ExitCode {
    stratlab_strategies::heap::keep_freed_memory();
    let cli = Cli::parse();
    match commands::execute(cli.command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(exit::exit_code(&error))
        }
    }
}
