#if os(Linux)

import Glibc

/// A `NETLINK_ROUTE` socket. It lives in the network namespace of the thread that opened it.
///
/// The type only wraps the descriptor; who may use it from which thread is up to its owner
/// (the monitor's event thread, or a lock around request and reply).
final class NetlinkSocket: Sendable {
    /// Why a netlink socket could not be opened or used.
    struct Failure: Error, CustomStringConvertible {
        var operation: String
        var code: Int32

        var description: String {
            "netlink \(operation) failed: \(String(cString: strerror(code)))"
        }
    }

    let descriptor: Int32

    /// Opens a socket, subscribed to `groups` (none for a request socket).
    /// - Parameters:
    ///   - receiveBufferSize: `SO_RCVBUF`, so that bursts of events seldom overflow.
    ///   - receiveTimeoutMilliseconds: `SO_RCVTIMEO`, so that a reply that never comes
    ///     cannot block its caller forever.
    init(groups: UInt32, receiveBufferSize: Int32? = nil, receiveTimeoutMilliseconds: Int? = nil) throws(Failure) {
        let descriptor = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Netlink.routeProtocol)
        guard descriptor >= 0 else { throw Failure(operation: "socket", code: errno) }
        do throws(Failure) {
            if var size = receiveBufferSize {
                guard setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
                    throw Failure(operation: "setsockopt(SO_RCVBUF)", code: errno)
                }
            }
            if let milliseconds = receiveTimeoutMilliseconds {
                var timeout = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
                guard setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0 else {
                    throw Failure(operation: "setsockopt(SO_RCVTIMEO)", code: errno)
                }
            }
            var address = NetlinkAddress(groups: groups)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<NetlinkAddress>.size))
                }
            }
            guard bound == 0 else { throw Failure(operation: "bind", code: errno) }
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        self.descriptor = descriptor
    }

    deinit {
        Glibc.close(descriptor)
    }

    /// Sends one request to the kernel.
    func send(_ request: [UInt8]) throws(Failure) {
        var kernel = NetlinkAddress()
        let sent = request.withUnsafeBytes { bytes in
            withUnsafePointer(to: &kernel) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<NetlinkAddress>.size))
                }
            }
        }
        guard sent == request.count else { throw Failure(operation: "sendto", code: sent < 0 ? errno : EMSGSIZE) }
    }

    /// Receives one datagram into `buffer`; returns its length, or -1 with `errno` set.
    func receive(into buffer: UnsafeMutableRawBufferPointer, flags: Int32 = 0) -> Int {
        recv(descriptor, buffer.baseAddress, buffer.count, flags)
    }
}

#endif
