//! File I/O for coroutines: `std::fs` calls run inside [`blocking`], so a slow disk or
//! network file system holds up only the coroutine that asked, not its P's queue.
//!
//! Regular files have no readiness to wait for (epoll refuses them), so Go runs file
//! reads and writes as system calls the same way: a fast call costs two atomic
//! operations more than std's; one that blocks has its P handed to another thread by
//! sysmon after ~20 µs. On a plain thread these are std's functions.

use std::ffi::OsString;
use std::fs::{self as stdfs, FileType, Metadata, OpenOptions, Permissions};
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

/// Creates a directory; its parent must exist (`std::fs::create_dir`).
pub fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    blocking(|| stdfs::create_dir(path))
}

/// Creates a directory and its missing parents (`std::fs::create_dir_all`).
pub fn create_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    blocking(|| stdfs::create_dir_all(path))
}

/// Removes an empty directory (`std::fs::remove_dir`).
pub fn remove_dir(path: impl AsRef<Path>) -> io::Result<()> {
    blocking(|| stdfs::remove_dir(path))
}

/// Removes a directory and everything in it (`std::fs::remove_dir_all`).
pub fn remove_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    blocking(|| stdfs::remove_dir_all(path))
}

/// A path's metadata, following symlinks (`std::fs::metadata`).
pub fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    blocking(|| stdfs::metadata(path))
}

/// A path's metadata, not following a final symlink (`std::fs::symlink_metadata`).
pub fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    blocking(|| stdfs::symlink_metadata(path))
}

/// The absolute path with every symlink and `.`/`..` resolved (`std::fs::canonicalize`).
pub fn canonicalize(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    blocking(|| stdfs::canonicalize(path))
}

/// Whether a path exists; `Err` when that cannot be told, e.g. a parent directory
/// without search permission (`std::fs::exists`).
pub fn exists(path: impl AsRef<Path>) -> io::Result<bool> {
    blocking(|| path.as_ref().try_exists())
}

/// What a symlink points at (`std::fs::read_link`).
pub fn read_link(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    blocking(|| stdfs::read_link(path))
}

/// Makes `link` a new name for the file `original` (`std::fs::hard_link`).
pub fn hard_link(original: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    blocking(|| stdfs::hard_link(original, link))
}

/// Makes `link` a symlink to `original` (`std::os::unix::fs::symlink`).
pub fn symlink(original: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    blocking(|| std::os::unix::fs::symlink(original, link))
}

/// Changes a path's permissions (`std::fs::set_permissions`).
pub fn set_permissions(path: impl AsRef<Path>, perm: Permissions) -> io::Result<()> {
    blocking(|| stdfs::set_permissions(path, perm))
}

/// A directory's entries, in the order the OS lists them (`std::fs::read_dir`).
///
/// The whole listing is read inside one blocking call, so iterating never blocks; an
/// entry the OS failed to list is an `Err` item in its place, as in std.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("goro-doc-read-dir-{}", std::process::id()));
/// goro::fs::create_dir_all(dir.join("sub")).unwrap();
/// goro::fs::write(dir.join("a.txt"), "a").unwrap();
/// let mut seen: Vec<(String, bool)> = goro::fs::read_dir(&dir)
///     .unwrap()
///     .map(|e| {
///         let e = e.unwrap();
///         (e.file_name().into_string().unwrap(), e.file_type().unwrap().is_dir())
///     })
///     .collect();
/// seen.sort();
/// assert_eq!(seen, [("a.txt".into(), false), ("sub".into(), true)]);
/// # goro::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn read_dir(path: impl AsRef<Path>) -> io::Result<ReadDir> {
    blocking(|| {
        let entries: Vec<io::Result<DirEntry>> = stdfs::read_dir(path)?
            .map(|e| e.map(|inner| DirEntry { inner }))
            .collect();
        Ok(ReadDir {
            entries: entries.into_iter(),
        })
    })
}

/// The entries of a directory listing: see [`read_dir`].
#[derive(Debug)]
pub struct ReadDir {
    entries: std::vec::IntoIter<io::Result<DirEntry>>,
}

impl Iterator for ReadDir {
    type Item = io::Result<DirEntry>;

    fn next(&mut self) -> Option<io::Result<DirEntry>> {
        self.entries.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

/// One entry of a [`read_dir`] listing (`std::fs::DirEntry`).
#[derive(Debug)]
pub struct DirEntry {
    inner: stdfs::DirEntry,
}

impl DirEntry {
    /// The entry's full path: the listed directory joined with [`file_name`](Self::file_name).
    pub fn path(&self) -> PathBuf {
        self.inner.path()
    }

    /// The entry's name within its directory.
    pub fn file_name(&self) -> OsString {
        self.inner.file_name()
    }

    /// The entry's type, not following symlinks. Usually known from the listing
    /// itself; on file systems that do not report it, a `stat` in a blocking call.
    pub fn file_type(&self) -> io::Result<FileType> {
        blocking(|| self.inner.file_type())
    }

    /// The entry's metadata, not following symlinks (a `stat`, in a blocking call).
    pub fn metadata(&self) -> io::Result<Metadata> {
        blocking(|| self.inner.metadata())
    }
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

    /// A second handle to the same open file, sharing its offset (`dup`).
    pub fn try_clone(&self) -> io::Result<File> {
        self.inner.try_clone().map(File::from_std)
    }

    /// std's `OpenOptions`, to pass to [`open_with`](Self::open_with).
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Changes the file's permissions.
    pub fn set_permissions(&self, perm: Permissions) -> io::Result<()> {
        blocking(|| self.inner.set_permissions(perm))
    }
}

/// Reads, writes and seeks through a shared reference, as std's `&File` allows: the
/// file offset is the kernel's, shared by every handle of this open file.
impl Read for &File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        blocking(|| (&self.inner).read(buf))
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        blocking(|| (&self.inner).read_to_end(buf))
    }

    fn read_to_string(&mut self, buf: &mut String) -> io::Result<usize> {
        blocking(|| (&self.inner).read_to_string(buf))
    }
}

impl Write for &File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        blocking(|| (&self.inner).write(buf))
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        blocking(|| (&self.inner).write_all(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        // std's File has no user-space buffer: nothing to flush.
        Ok(())
    }
}

impl Seek for &File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        blocking(|| (&self.inner).seek(pos))
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        (&*self).read_to_end(buf)
    }

    fn read_to_string(&mut self, buf: &mut String) -> io::Result<usize> {
        (&*self).read_to_string(buf)
    }
}

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        (&*self).write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self).flush()
    }
}

impl Seek for File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        (&*self).seek(pos)
    }
}

impl std::os::fd::AsFd for File {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl std::os::fd::AsRawFd for File {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.inner)
    }
}

impl From<stdfs::File> for File {
    fn from(inner: stdfs::File) -> File {
        File { inner }
    }
}

impl From<File> for stdfs::File {
    fn from(f: File) -> stdfs::File {
        f.inner
    }
}

impl From<File> for std::os::fd::OwnedFd {
    fn from(f: File) -> std::os::fd::OwnedFd {
        f.inner.into()
    }
}

impl From<std::os::fd::OwnedFd> for File {
    fn from(fd: std::os::fd::OwnedFd) -> File {
        File { inner: fd.into() }
    }
}
