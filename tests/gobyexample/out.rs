//! The programs' stdout: what Go's `fmt.Print`/`fmt.Println` would write, collected so
//! the test can compare it with Go's published output. A clone prints to the same
//! text (goroutines print too).

use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
pub struct Out(Arc<Mutex<String>>);

impl Out {
    pub fn new() -> Out {
        Out::default()
    }

    /// `fmt.Print(s)`.
    pub fn print(&self, s: impl AsRef<str>) {
        self.0.lock().unwrap().push_str(s.as_ref());
    }

    /// `fmt.Println(s)`: one write, so lines from concurrent goroutines do not mix.
    pub fn println(&self, s: impl AsRef<str>) {
        let mut text = self.0.lock().unwrap();
        text.push_str(s.as_ref());
        text.push('\n');
    }

    /// The lines printed so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().lines().map(str::to_string).collect()
    }
}
