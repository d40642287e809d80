import Synchronization

/// A response body on its way to disk: written to a temporary file as it arrives, counted
/// against `maxBytes`, hashed, with its first and last bytes kept for format checks.
public final class Payload: BodySink {
    /// The body grew past the job's `maxBytes`.
    public struct TooLarge: Error, CustomStringConvertible {
        public var limit: Int
        public var description: String { "the payload is larger than maxBytes (\(limit) bytes)" }
    }

    /// How many leading bytes are kept in memory for sniffing.
    public static let prefixLimit = 512 * 1024
    public static let suffixLimit = 64

    public let file: TemporaryFile
    public let maxBytes: Int
    private let state = Mutex(State())

    private struct State {
        var count = 0
        var hasher = SHA256()
        var prefix: [UInt8] = []
        var suffix: [UInt8] = []
    }

    public init(file: TemporaryFile, maxBytes: Int) {
        self.file = file
        self.maxBytes = maxBytes
    }

    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        try state.withLock { state in
            guard state.count + bytes.count <= maxBytes else { throw TooLarge(limit: maxBytes) }
            try file.append(bytes)
            state.count += bytes.count
            state.hasher.update(bytes)
            if state.prefix.count < Self.prefixLimit {
                state.prefix.append(contentsOf: bytes.prefix(Self.prefixLimit - state.prefix.count))
            }
            state.suffix.append(contentsOf: bytes.suffix(Self.suffixLimit))
            if state.suffix.count > Self.suffixLimit { state.suffix.removeFirst(state.suffix.count - Self.suffixLimit) }
        }
    }

    /// Bytes received so far.
    public var count: Int { state.withLock { $0.count } }
    /// The first bytes (up to 512 KiB).
    public var prefix: [UInt8] { state.withLock { $0.prefix } }
    /// The last bytes (up to 64).
    public var suffix: [UInt8] { state.withLock { $0.suffix } }
    /// The SHA-256 of everything received, in hex.
    public var sha256: String { state.withLock { state in
        var copy = state.hasher
        return copy.finalizeHex()
    } }

    /// The whole body, read back from disk (bounded by maxBytes).
    public func bytes() throws -> [UInt8] {
        if count <= Self.prefixLimit { return prefix }
        return try file.readAll()
    }
}
