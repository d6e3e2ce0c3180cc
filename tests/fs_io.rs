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
                .into_iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
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
