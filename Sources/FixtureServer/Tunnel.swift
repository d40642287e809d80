import Glibc

/// The upstream end of a CONNECT tunnel (RFC 9110 section 9.3.6), as an HTTPS proxy opens one: a
/// TCP connection to a loopback port, and the relay that copies bytes both ways between it and
/// the client. Only loopback targets are allowed (127.0.0.1, ::1, localhost), and names are never
/// looked up, so a test's tunnel cannot reach beyond the machine.
struct Tunnel {
    /// Why no tunnel was opened, with the status to answer.
    struct Refusal: Swift.Error {
        var status: Int
        var message: String
    }

    let upstream: Socket

    /// Connects to `authority` ("host:port", as `HTTPRequest.tunnelAuthority` checked it).
    static func open(to authority: String) -> Result<Tunnel, Refusal> {
        guard let colon = authority.lastIndex(of: ":"), let port = UInt16(authority[authority.index(after: colon)...]) else {
            return .failure(Refusal(status: 400, message: "CONNECT needs host:port"))
        }
        var host = String(authority[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        }
        guard ["127.0.0.1", "::1", "localhost"].contains(host.lowercased()),
            let address = try? SocketAddress(host: host.lowercased(), port: port)
        else {
            return .failure(Refusal(status: 403, message: "the fixture server tunnels to loopback addresses only, not to \(authority)"))
        }
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            return .failure(Refusal(status: 502, message: "no socket for a tunnel: \(String(cString: strerror(errno)))"))
        }
        guard address.connect(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            return .failure(Refusal(status: 502, message: "could not connect to \(authority): \(reason)"))
        }
        let tunnel = Tunnel(upstream: Socket(fd: fd))
        tunnel.upstream.setNoDelay()
        return .success(tunnel)
    }

    /// Sends `pending` (what the client sent after its CONNECT) upstream, then copies bytes both
    /// ways until either end closes or fails, or the server stops (`stopFD` readable).
    func relay(client: Socket, pending: [UInt8], stopFD: Int32) {
        guard pending.isEmpty || upstream.send(pending) else { return }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var fds = [
                pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0),
                pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0),
                pollfd(fd: upstream.fd, events: Int16(POLLIN), revents: 0),
            ]
            if poll(&fds, nfds_t(fds.count), -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[0].revents != 0 { return }
            for (index, from, to) in [(1, client, upstream), (2, upstream, client)] where fds[index].revents != 0 {
                let count = chunk.withUnsafeMutableBytes { recv(from.fd, $0.baseAddress, $0.count, 0) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0, to.send(chunk[0..<count]) else { return }
            }
        }
    }

    /// Closes the upstream connection.
    func close() {
        Glibc.close(upstream.fd)
    }
}
