import Glibc

extension FixtureServer {
    /// Why the server could not start.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        /// The host is not an IPv4 or IPv6 literal (or "localhost").
        case invalidHost(String)
        /// `start()` was called on a running server.
        case alreadyStarted
        /// `start()` was called after `stop()`; a server runs once.
        case stopped
        /// A system call failed; `code` is its errno.
        case system(operation: String, address: String, code: Int32)

        public var description: String {
            switch self {
            case .invalidHost(let host):
                "the fixture server cannot listen on \"\(host)\": give an IPv4 or IPv6 address"
            case .alreadyStarted:
                "the fixture server is already running"
            case .stopped:
                "the fixture server was stopped and cannot start again"
            case .system(let operation, let address, let code):
                "the fixture server could not \(operation) \(address): \(String(cString: strerror(code)))"
            }
        }
    }
}
