//! UDP: [`UdpSocket`].

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::Duration;

use socket2::SockAddr;

use super::poll::Dir;
use super::socket::{each_addr, Registered};
use crate::sys;

/// A UDP socket on the netpoller.
pub struct UdpSocket {
    reg: Registered<std::net::UdpSocket>,
}

impl UdpSocket {
    /// Binds to `addr`.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let s = each_addr(addr, |a| std::net::UdpSocket::bind(a))?;
        s.set_nonblocking(true)?;
        Ok(UdpSocket {
            reg: Registered::new(s)?,
        })
    }

    /// Sets the default peer for `send` and `recv` (and filters received datagrams).
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        each_addr(addr, |a| self.reg.sock.connect(a))
    }

    /// Sends a datagram to the connected peer.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.io(Dir::Write, |s| {
            sys::os_err(sys::send(s.as_raw_fd(), buf, libc::MSG_NOSIGNAL))
        })
    }

    /// Receives a datagram from the connected peer.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg
            .io(Dir::Read, |s| sys::os_err(sys::recv(s.as_raw_fd(), buf, 0)))
    }

    /// Sends a datagram to `addr` (its first resolved address).
    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let a = super::socket::resolve(addr)?
            .into_iter()
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to send to"))?;
        let a = SockAddr::from(a);
        self.reg.io(Dir::Write, |s| {
            sys::os_err(sys::send_to(s.as_raw_fd(), buf, &a, libc::MSG_NOSIGNAL))
        })
    }

    /// Receives a datagram and the address it came from.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (n, addr) = self.reg.io(Dir::Read, |s| {
            sys::os_err(sys::recv_from(s.as_raw_fd(), buf, 0))
        })?;
        let addr = addr.as_socket().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "recv_from: not an IP address")
        })?;
        Ok((n, addr))
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.reg.sock.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.reg.sock.local_addr()
    }

    /// Each receive waits at most `timeout` (`None`: no limit); expiry is
    /// `ErrorKind::TimedOut`.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.reg.timeouts.set(Dir::Read, timeout)
    }

    /// Each send waits at most `timeout` (`None`: no limit).
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.reg.timeouts.set(Dir::Write, timeout)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.reg.timeouts.get(Dir::Read))
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.reg.timeouts.get(Dir::Write))
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.reg.sock.set_broadcast(on)
    }

    /// A second handle to the same socket (a duplicated descriptor).
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        let s = self.reg.sock.try_clone()?;
        Ok(UdpSocket {
            reg: Registered::new(s)?,
        })
    }

    /// Closes the socket: blocked and later operations fail. The descriptor is
    /// released when the socket is dropped.
    pub fn close(&self) {
        self.reg.close();
    }
}

super::socket::impl_socket!(UdpSocket);
