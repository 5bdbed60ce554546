//! Standard output for the CLI: a closed pipe (`rgml … | head`) ends the
//! process quietly with success, as Unix tools do, instead of the panic
//! `println!` gives.

use std::fmt;
use std::io::{ErrorKind, Write};

/// Writes `args` to standard output; on a closed pipe the process exits with
/// status 0, on any other write error with status 1 and a message.
pub fn write(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to standard output: {e}");
        std::process::exit(1);
    }
}

/// `print!` that ends the process quietly when standard output is a closed pipe.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::out::write(format_args!($($t)*)) };
}

/// `println!` that ends the process quietly when standard output is a closed pipe.
#[macro_export]
macro_rules! outln {
    () => { $crate::out::write(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::write(format_args!("{}\n", format_args!($($t)*))) };
}
