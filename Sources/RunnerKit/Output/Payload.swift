import Synchronization

/// A response body on its way to disk: counted against `maxBytes`, hashed, with its first and
/// last bytes kept for format checks.
///
/// A small body stays in memory until it is committed (the temporary file is made then, on
/// the committing thread, not on the HTTP client's); past `memoryLimit` it spills to a
/// temporary file and streams there. A fetch that fails before the body outgrew memory never
/// touches the disk.
public final class Payload: BodySink {
    /// The body grew past the job's `maxBytes`.
    public struct TooLarge: Error, CustomStringConvertible {
        public var limit: Int
        public var description: String { "the payload is larger than maxBytes (\(limit) bytes); raise maxBytes in the job if so large a payload is expected" }
    }

    /// How many leading bytes are kept in memory for sniffing.
    public static let prefixLimit = 512 * 1024
    public static let suffixLimit = 64
    /// A body up to this size is held in memory until it is committed.
    public static let memoryLimit = 64 * 1024

    public let maxBytes: Int
    private let store: OutputStore
    private let folder: String
    private let state = Mutex(State())
    private let inspector: Inspector?
    /// `--limit-rate`: each write takes its bytes of it (waiting when ahead).
    private let bandwidth: BandwidthLimit?

    /// Looks at the first bytes as they arrive, before the rest does: returns true once it has
    /// seen enough (it is not asked again), or throws to stop the transfer with that error (an
    /// image whose header declares more pixels than allowed is refused before its body comes).
    public typealias Inspector = @Sendable (_ prefix: [UInt8]) throws -> Bool

    /// Bytes past which the inspector is asked no more.
    public static let inspectionLimit = 64 * 1024

    private struct State {
        var file: TemporaryFile?
        var discarded = false
        var count = 0
        /// Fed once the body spilled to the file; before that, the hash is taken of `prefix`.
        var hasher = SHA256()
        /// The first bytes; while there is no file, the whole body.
        var prefix: [UInt8] = []
        /// The last bytes, kept once the body spilled to the file.
        var suffix: [UInt8] = []
        /// The inspector has seen enough (or there is none).
        var inspected = false
    }

    /// A body for a temporary file in `folder` (relative to the store's root); `inspector`
    /// looks at its first bytes as they arrive.
    public init(store: OutputStore, folder: String, maxBytes: Int, inspector: Inspector? = nil, bandwidth: BandwidthLimit? = nil) {
        self.store = store
        self.folder = folder
        self.maxBytes = maxBytes
        self.inspector = inspector
        self.bandwidth = bandwidth
        if inspector == nil { state.withLock { $0.inspected = true } }
    }

    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        bandwidth?.take(bytes.count)
        try state.withLock { state in
            guard !state.discarded else {
                throw OutputStore.WriteError(path: folder, reason: "the payload was already discarded")
            }
            guard state.count + bytes.count <= maxBytes else { throw TooLarge(limit: maxBytes) }
            if !state.inspected, let inspector {
                // Asked before the bytes are kept: an error stops the transfer here.
                var seen = state.prefix
                seen.append(contentsOf: bytes.prefix(Self.inspectionLimit - min(seen.count, Self.inspectionLimit)))
                state.inspected = try inspector(seen) || seen.count >= Self.inspectionLimit
            }
            if state.file == nil && state.count + bytes.count <= Self.memoryLimit {
                state.prefix.append(contentsOf: bytes)
                state.count += bytes.count
                return
            }
            try Self.file(&state, store, folder).append(bytes)
            state.count += bytes.count
            state.hasher.update(bytes)
            if state.prefix.count < Self.prefixLimit {
                state.prefix.append(contentsOf: bytes.prefix(Self.prefixLimit - state.prefix.count))
            }
            state.suffix.append(contentsOf: bytes.suffix(Self.suffixLimit))
            if state.suffix.count > Self.suffixLimit { state.suffix.removeFirst(state.suffix.count - Self.suffixLimit) }
        }
    }

    /// The temporary file, made on first need with everything held in memory so far.
    private static func file(_ state: inout State, _ store: OutputStore, _ folder: String) throws -> TemporaryFile {
        if let file = state.file { return file }
        guard !state.discarded else {
            throw OutputStore.WriteError(path: folder, reason: "the payload was already discarded")
        }
        let file = try store.makeTemporaryFile(in: folder)
        try state.prefix.withUnsafeBytes { held in
            try file.append(held)
            state.hasher.update(held)
            state.suffix = Array(held.suffix(suffixLimit))
        }
        state.file = file
        return file
    }

    /// The temporary file holding the body (made now if the body is still in memory).
    public func file() throws -> TemporaryFile {
        try state.withLock { try Self.file(&$0, store, folder) }
    }

    /// Removes the temporary file, if one was made and not committed; later writes fail.
    public func discard() {
        let file = state.withLock { state -> TemporaryFile? in
            state.discarded = true
            return state.file
        }
        file?.discard()
    }

    /// Bytes received so far.
    public var count: Int { state.withLock { $0.count } }
    /// The first bytes (up to 512 KiB).
    public var prefix: [UInt8] { state.withLock { $0.prefix } }
    /// The last bytes (up to 64).
    public var suffix: [UInt8] { state.withLock { $0.file == nil ? Array($0.prefix.suffix(Self.suffixLimit)) : $0.suffix } }
    /// The SHA-256 of everything received, in hex.
    public var sha256: String { state.withLock { state in
        var copy = state.hasher
        if state.file == nil { copy.update(state.prefix) }
        return copy.finalizeHex()
    } }

    /// The whole body, read back from disk (bounded by maxBytes).
    public func bytes() throws -> [UInt8] {
        if count <= Self.prefixLimit { return prefix }
        return try file().readAll()
    }
}
