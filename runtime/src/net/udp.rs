//! UDP: [`UdpSocket`].

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use socket2::SockAddr;

use super::socket::{each_addr, Registered};

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
        self.reg.send(buf)
    }

    /// Receives a datagram from the connected peer.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.recv(buf, 0)
    }

    /// Receives the next datagram from the connected peer without taking it: the next
    /// `recv` (or peek) gets it again (`MSG_PEEK`). Waits, as `recv` does, while none
    /// has arrived.
    ///
    /// ```
    /// let s = goro::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// s.connect(s.local_addr().unwrap()).unwrap();
    /// s.send(b"ping").unwrap();
    /// let mut buf = [0; 8];
    /// assert_eq!(s.peek(&mut buf).unwrap(), 4);
    /// assert_eq!(s.recv(&mut buf).unwrap(), 4);
    /// assert_eq!(&buf[..4], b"ping");
    /// ```
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.recv(buf, libc::MSG_PEEK)
    }

    /// Sends a datagram to `addr` (its first resolved address).
    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let a = super::socket::resolve(addr)?
            .into_iter()
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to send to"))?;
        self.reg.send_to(buf, &SockAddr::from(a))
    }

    /// Receives a datagram and the address it came from.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_from_flags(buf, 0)
    }

    /// Receives the next datagram and its sender without taking it: the next
    /// `recv_from` (or peek) gets it again (`MSG_PEEK`). Waits, as `recv_from` does,
    /// while none has arrived.
    ///
    /// ```
    /// let a = goro::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = goro::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// b.send_to(b"ping", a.local_addr().unwrap()).unwrap();
    /// let mut buf = [0; 8];
    /// let (n, from) = a.peek_from(&mut buf).unwrap();
    /// assert_eq!((n, from), (4, b.local_addr().unwrap()));
    /// assert_eq!(a.recv_from(&mut buf).unwrap(), (n, from));
    /// ```
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_from_flags(buf, libc::MSG_PEEK)
    }

    fn recv_from_flags(
        &self,
        buf: &mut [u8],
        flags: libc::c_int,
    ) -> io::Result<(usize, SocketAddr)> {
        let (n, addr) = self.reg.recv_from(buf, flags)?;
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

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.reg.sock.set_broadcast(on)
    }

    /// Whether `SO_BROADCAST` is set.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.reg.sock.broadcast()
    }

    /// Sets `IP_TTL`, the time-to-live of the datagrams this socket sends.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.reg.sock.set_ttl(ttl)
    }

    /// `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.reg.sock.ttl()
    }

    /// The pending socket error, if any (`SO_ERROR`): an ICMP error for an earlier
    /// datagram, say.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.reg.sock.take_error()
    }

    /// Joins the IPv4 multicast group `multiaddr` on the interface with address
    /// `interface` (`Ipv4Addr::UNSPECIFIED`: the system's choice),
    /// `IP_ADD_MEMBERSHIP`.
    ///
    /// ```
    /// use std::net::Ipv4Addr;
    /// let s = goro::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let group = Ipv4Addr::new(239, 255, 0, 1);
    /// // As with std, a machine without a multicast route refuses the join.
    /// if s.join_multicast_v4(&group, &Ipv4Addr::LOCALHOST).is_ok() {
    ///     s.leave_multicast_v4(&group, &Ipv4Addr::LOCALHOST).unwrap();
    /// }
    /// ```
    pub fn join_multicast_v4(&self, multiaddr: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.reg.sock.join_multicast_v4(multiaddr, interface)
    }

    /// Joins the IPv6 multicast group `multiaddr` on the interface with index
    /// `interface` (0: the system's choice), `IPV6_ADD_MEMBERSHIP`.
    pub fn join_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.reg.sock.join_multicast_v6(multiaddr, interface)
    }

    /// Leaves a group joined with [`join_multicast_v4`](Self::join_multicast_v4).
    pub fn leave_multicast_v4(&self, multiaddr: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.reg.sock.leave_multicast_v4(multiaddr, interface)
    }

    /// Leaves a group joined with [`join_multicast_v6`](Self::join_multicast_v6).
    pub fn leave_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.reg.sock.leave_multicast_v6(multiaddr, interface)
    }

    /// Sets `IP_MULTICAST_LOOP`: whether multicast datagrams this socket sends loop
    /// back to the local host.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.reg.sock.set_multicast_loop_v4(on)
    }

    /// `IP_MULTICAST_LOOP`.
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.reg.sock.multicast_loop_v4()
    }

    /// Sets `IP_MULTICAST_TTL`, the time-to-live of the multicast datagrams this
    /// socket sends.
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.reg.sock.set_multicast_ttl_v4(ttl)
    }

    /// `IP_MULTICAST_TTL`.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.reg.sock.multicast_ttl_v4()
    }

    /// Sets `IPV6_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.reg.sock.set_multicast_loop_v6(on)
    }

    /// `IPV6_MULTICAST_LOOP`.
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.reg.sock.multicast_loop_v6()
    }

    /// Adopts a socket made elsewhere (by std, socket2, or inherited): sets it
    /// non-blocking and registers it with the poller. Datagrams already queued on it
    /// stay. Fails if the descriptor cannot be registered.
    ///
    /// ```
    /// let std_s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let s = goro::net::UdpSocket::from_std(std_s).unwrap();
    /// s.send_to(b"x", s.local_addr().unwrap()).unwrap();
    /// assert_eq!(s.recv_from(&mut [0; 1]).unwrap().0, 1);
    /// ```
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            reg: Registered::adopt(socket)?,
        })
    }

    /// Hands the socket back to std: deregistered, and in blocking mode again (tokio
    /// leaves it non-blocking; see "Conversions" in the module docs). Queued
    /// datagrams stay.
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        self.reg.into_std()
    }

    /// A second handle to the same socket (a duplicated descriptor).
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            reg: self.reg.try_clone()?,
        })
    }

    /// Closes the socket: blocked and later operations fail. The descriptor is
    /// released when the socket is dropped.
    pub fn close(&self) {
        self.reg.close();
    }
}

super::socket::impl_socket!(UdpSocket);
super::socket::impl_fd_conv!(UdpSocket);
super::socket::impl_timeouts!(UdpSocket);
