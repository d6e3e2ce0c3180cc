//! File I/O for coroutines: `std::fs` calls run inside [`blocking`], so a slow disk or
//! network file system holds up only the coroutine that asked, not its P's queue.
//!
//! Regular files have no readiness to wait for (epoll refuses them), so Go runs file
//! reads and writes as system calls the same way: a fast call costs two atomic
//! operations more than std's; one that blocks has its P handed to another thread by
//! sysmon after ~20 µs. On a plain thread these are std's functions.

use std::fs::{self as stdfs, Metadata, OpenOptions, Permissions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::blocking;

/// Reads a whole file (`std::fs::read`).
pub fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    blocking(|| stdfs::read(path))
}

/// Reads a whole file as UTF-8 (`std::fs::read_to_string`).
pub fn read_to_string(path: impl AsRef<Path>) -> io::Result<String> {
    blocking(|| stdfs::read_to_string(path))
}

/// Writes `contents` to a file, creating or truncating it (`std::fs::write`).
pub fn write(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> io::Result<()> {
    blocking(|| stdfs::write(path, contents))
}

/// Copies a file; returns the bytes copied (`std::fs::copy`).
pub fn copy(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<u64> {
    blocking(|| stdfs::copy(from, to))
}

/// Renames a file or directory (`std::fs::rename`).
pub fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    blocking(|| stdfs::rename(from, to))
}

/// Removes a file (`std::fs::remove_file`).
pub fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    blocking(|| stdfs::remove_file(path))
}

/// Creates a directory and its missing parents (`std::fs::create_dir_all`).
pub fn create_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    blocking(|| stdfs::create_dir_all(path))
}

/// Removes a directory and everything in it (`std::fs::remove_dir_all`).
pub fn remove_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    blocking(|| stdfs::remove_dir_all(path))
}

/// A path's metadata, following symlinks (`std::fs::metadata`).
pub fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    blocking(|| stdfs::metadata(path))
}

/// The paths in a directory, in the order the OS lists them (`std::fs::read_dir`,
/// collected inside one blocking call).
pub fn read_dir(path: impl AsRef<Path>) -> io::Result<Vec<PathBuf>> {
    blocking(|| {
        stdfs::read_dir(path)?
            .map(|e| e.map(|e| e.path()))
            .collect()
    })
}

/// An open file whose reads, writes and seeks are blocking calls.
#[derive(Debug)]
pub struct File {
    inner: stdfs::File,
}

impl File {
    /// Opens a file for reading (`std::fs::File::open`).
    pub fn open(path: impl AsRef<Path>) -> io::Result<File> {
        blocking(|| stdfs::File::open(path)).map(File::from_std)
    }

    /// Creates or truncates a file for writing (`std::fs::File::create`).
    pub fn create(path: impl AsRef<Path>) -> io::Result<File> {
        blocking(|| stdfs::File::create(path)).map(File::from_std)
    }

    /// Opens a file with `options`.
    pub fn open_with(path: impl AsRef<Path>, options: &OpenOptions) -> io::Result<File> {
        blocking(|| options.open(path)).map(File::from_std)
    }

    /// Wraps a std file.
    pub fn from_std(inner: stdfs::File) -> File {
        File { inner }
    }

    /// The std file inside.
    pub fn into_std(self) -> stdfs::File {
        self.inner
    }

    /// Flushes data and metadata to the device (`fsync`).
    pub fn sync_all(&self) -> io::Result<()> {
        blocking(|| self.inner.sync_all())
    }

    /// Flushes data to the device (`fdatasync`).
    pub fn sync_data(&self) -> io::Result<()> {
        blocking(|| self.inner.sync_data())
    }

    /// Truncates or extends the file to `size` bytes.
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        blocking(|| self.inner.set_len(size))
    }

    /// The file's metadata.
    pub fn metadata(&self) -> io::Result<Metadata> {
        blocking(|| self.inner.metadata())
    }

    /// Changes the file's permissions.
    pub fn set_permissions(&self, perm: Permissions) -> io::Result<()> {
        blocking(|| self.inner.set_permissions(perm))
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        blocking(|| self.inner.read(buf))
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        blocking(|| self.inner.read_to_end(buf))
    }
}

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        blocking(|| self.inner.write(buf))
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        blocking(|| self.inner.write_all(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        // std's File has no user-space buffer: nothing to flush.
        Ok(())
    }
}

impl Seek for File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        blocking(|| self.inner.seek(pos))
    }
}

impl std::os::fd::AsFd for File {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.as_fd()
    }
}
