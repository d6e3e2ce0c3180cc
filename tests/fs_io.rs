//! `goro::fs`: std's file operations as blocking calls, from coroutines and threads.

mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::Duration;

use common::with_timeout;

const T: Duration = Duration::from_secs(60);

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("goro-fs-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// The directory and link calls std users reach for, checked against std's own
/// answers on the same tree. Run from a coroutine and from a plain thread.
fn directories_and_links(d: &std::path::Path) {
    use goro::fs;
    fs::create_dir(d).unwrap();
    assert_eq!(
        fs::create_dir(d).unwrap_err().kind(),
        std::io::ErrorKind::AlreadyExists
    );
    // create_dir does not make parents; create_dir_all does.
    assert_eq!(
        fs::create_dir(d.join("x/y")).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    fs::create_dir_all(d.join("x/y")).unwrap();
    fs::write(d.join("x/f.txt"), "data").unwrap();
    fs::symlink("f.txt", d.join("x/link")).unwrap();
    fs::hard_link(d.join("x/f.txt"), d.join("x/hard")).unwrap();

    assert_eq!(
        fs::read_link(d.join("x/link")).unwrap(),
        PathBuf::from("f.txt")
    );
    assert!(fs::symlink_metadata(d.join("x/link"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::metadata(d.join("x/link")).unwrap().is_file());
    assert_eq!(
        fs::canonicalize(d.join("x/y/../link")).unwrap(),
        std::fs::canonicalize(d.join("x/f.txt")).unwrap()
    );
    assert!(fs::exists(d.join("x/hard")).unwrap());
    assert!(!fs::exists(d.join("nope")).unwrap());

    // Entries carry their names and types (a symlink is a symlink, not its target).
    let mut seen: Vec<(String, &str)> = fs::read_dir(d.join("x"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            assert_eq!(e.path(), d.join("x").join(e.file_name()));
            let t = e.file_type().unwrap();
            let kind = if t.is_dir() {
                "dir"
            } else if t.is_symlink() {
                "symlink"
            } else {
                "file"
            };
            assert_eq!(e.metadata().unwrap().is_dir(), t.is_dir());
            (e.file_name().into_string().unwrap(), kind)
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("f.txt".to_string(), "file"),
            ("hard".to_string(), "file"),
            ("link".to_string(), "symlink"),
            ("y".to_string(), "dir")
        ]
    );
    assert_eq!(
        fs::read_dir(d.join("nope")).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );

    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(d.join("x/f.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        fs::metadata(d.join("x/f.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // remove_dir takes only empty directories.
    assert_eq!(
        fs::remove_dir(d.join("x")).unwrap_err().raw_os_error(),
        Some(libc::ENOTEMPTY)
    );
    fs::remove_dir(d.join("x/y")).unwrap();
    fs::remove_dir_all(d).unwrap();
    assert!(!fs::exists(d).unwrap());
}

#[test]
fn directories_and_links_from_a_coroutine_and_a_thread() {
    with_timeout(T, || {
        let dir = scratch("dirs-co");
        goro::go!(move || directories_and_links(&dir))
            .join()
            .unwrap();
        directories_and_links(&scratch("dirs-thread"));
    });
}

/// `&File` reads, writes and seeks like std's: two handles of one open file share
/// the kernel's offset, and a reader and a writer coroutine can hold `&File` at once.
#[test]
fn shared_file_handles_share_one_offset() {
    with_timeout(T, || {
        let dir = scratch("shared");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        goro::go!(move || {
            let f = goro::fs::File::open_with(
                &path,
                goro::fs::File::options()
                    .read(true)
                    .write(true)
                    .create(true),
            )
            .unwrap();
            let f = std::sync::Arc::new(f);
            let hs: Vec<_> = (0..8u8)
                .map(|i| {
                    let f = f.clone();
                    goro::go!(move || (&*f).write_all(&[0x80 | i; 100]).unwrap())
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let mut r = &*f;
            assert_eq!(r.stream_position().unwrap(), 800);
            let clone = f.try_clone().unwrap();
            (&clone).seek(SeekFrom::Start(0)).unwrap();
            // The clone moved the offset for both.
            let mut all = String::new();
            assert_eq!(
                r.read_to_string(&mut all).unwrap_err().kind(),
                std::io::ErrorKind::InvalidData,
                "the bytes are not UTF-8 text: read_to_string refuses them as std's does"
            );
            (&clone).seek(SeekFrom::Start(0)).unwrap();
            let mut bytes = Vec::new();
            r.read_to_end(&mut bytes).unwrap();
            assert_eq!(bytes.len(), 800);
            // Each writer's 100 bytes landed whole (O_APPEND is not set, but each
            // write_all of 100 bytes is one write at the shared offset).
            for chunk in bytes.chunks(100) {
                assert!(
                    chunk.iter().all(|&b| b == chunk[0]),
                    "torn write: {chunk:?}"
                );
            }
            let fd: std::os::fd::OwnedFd = clone.into();
            let again = goro::fs::File::from(fd);
            assert_eq!(again.metadata().unwrap().len(), 800);
        })
        .join()
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn whole_file_helpers_round_trip() {
    with_timeout(T, || {
        let dir = scratch("whole");
        let d = dir.clone();
        goro::go!(move || {
            goro::fs::create_dir_all(d.join("sub")).unwrap();
            let a = d.join("sub/a.txt");
            goro::fs::write(&a, "hello goro").unwrap();
            assert_eq!(goro::fs::read_to_string(&a).unwrap(), "hello goro");
            assert_eq!(goro::fs::copy(&a, d.join("b.txt")).unwrap(), 10);
            goro::fs::rename(d.join("b.txt"), d.join("c.txt")).unwrap();
            assert_eq!(goro::fs::read(d.join("c.txt")).unwrap(), b"hello goro");
            assert_eq!(goro::fs::metadata(&a).unwrap().len(), 10);
            let mut names: Vec<_> = goro::fs::read_dir(&d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            assert_eq!(names, ["c.txt", "sub"]);
            goro::fs::remove_file(d.join("c.txt")).unwrap();
            let e = goro::fs::read(d.join("c.txt")).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        })
        .join()
        .unwrap();
        // The same calls work on a plain thread.
        assert_eq!(
            goro::fs::read_to_string(dir.join("sub/a.txt")).unwrap(),
            "hello goro"
        );
        goro::fs::remove_dir_all(&dir).unwrap();
        assert!(!dir.exists());
    });
}

#[test]
fn file_read_write_seek_from_many_coroutines() {
    with_timeout(T, || {
        let dir = scratch("file");
        std::fs::create_dir_all(&dir).unwrap();
        let hs: Vec<_> = (0..16)
            .map(|i| {
                let path = dir.join(format!("f{i}"));
                goro::go!(move || {
                    let mut f = goro::fs::File::create(&path).unwrap();
                    for k in 0..100u32 {
                        f.write_all(&(i * 1000 + k).to_le_bytes()).unwrap();
                    }
                    f.sync_data().unwrap();
                    drop(f);
                    let mut f = goro::fs::File::open(&path).unwrap();
                    assert_eq!(f.metadata().unwrap().len(), 400);
                    f.seek(SeekFrom::Start(4 * 50)).unwrap();
                    let mut b = [0u8; 4];
                    f.read_exact(&mut b).unwrap();
                    assert_eq!(u32::from_le_bytes(b), i * 1000 + 50);
                    let mut rest = Vec::new();
                    f.read_to_end(&mut rest).unwrap();
                    assert_eq!(rest.len(), 4 * 49);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn name_resolution_goes_through_blocking() {
    with_timeout(T, || {
        // `localhost` needs getaddrinfo; from a coroutine it runs as a blocking call.
        goro::go!(|| {
            let l = goro::net::TcpListener::bind("localhost:0").unwrap();
            let port = l.local_addr().unwrap().port();
            let c = goro::go!(move || goro::net::TcpStream::connect(("localhost", port)).unwrap());
            let (_s, _) = l.accept().unwrap();
            drop(c.join().unwrap());
            let e = goro::net::TcpStream::connect("no-such-host.invalid:80").unwrap_err();
            // Resolution failures are errors, never hangs or panics.
            assert!(!e.to_string().is_empty());
        })
        .join()
        .unwrap();
    });
}
