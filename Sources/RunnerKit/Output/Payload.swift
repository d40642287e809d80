import Glibc
import Synchronization

/// A response body on its way to disk: counted against `maxBytes`, hashed, with its first and
/// last bytes kept for format checks.
///
/// A small body stays in memory until it is committed (the temporary file is made then, on
/// the committing thread, not on the HTTP client's); past `memoryLimit` it spills to a
/// temporary file and streams there. A fetch that fails before the body outgrew memory never
/// touches the disk.
///
/// A body that may be resumed (`PartialDownload`: the job's own URL, a strong validator, no
/// Content-Encoding, 1 MiB or more) streams to the key's partial file instead, synced and
/// described by its sidecar as it grows, and left there by `keep()` when the attempt is cut.
public final class Payload: BodySink {
    /// The body grew past the job's `maxBytes`.
    public struct TooLarge: Error, CustomStringConvertible {
        /// The job's `maxBytes`, in bytes.
        public var limit: Int
        public var description: String { "the payload is larger than maxBytes (\(limit) bytes); raise maxBytes in the job if so large a payload is expected" }
    }

    /// How many leading bytes are kept in memory for sniffing.
    package static let prefixLimit = 512 * 1024
    package static let suffixLimit = 64
    /// A body up to this size is held in memory until it is committed.
    package static let memoryLimit = 64 * 1024

    /// The most bytes the body may have (the job's `maxBytes`, counted after content decoding): a
    /// write past it throws `TooLarge`.
    public let maxBytes: Int
    private let store: OutputStore
    private let folder: String
    private let state = Mutex(State())
    private let inspector: Inspector?

    /// An answer to a range request that cannot be appended to what is kept: the request is made
    /// again without a range, from the start, and the record says why.
    package struct StartOver: Error, CustomStringConvertible {
        package var description: String
    }

    /// Where a resumable body goes, and what is kept of it from before (nil: nothing, no range
    /// was asked for).
    private let partial: PartialDownload.Plan?

    /// Looks at the first bytes as they arrive, before the rest does: returns true once it has
    /// seen enough (it is not asked again), or throws to stop the transfer with that error (an
    /// image whose header declares more pixels than allowed is refused before its body comes).
    public typealias Inspector = @Sendable (_ prefix: [UInt8]) throws -> Bool

    /// Bytes past which the inspector is asked no more.
    package static let inspectionLimit = 64 * 1024

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
        /// Bytes that came over the network in this transfer, the skipped ones included.
        var received = 0
        /// Bytes still to drop: a 206 that starts before the kept bytes end repeats them.
        var skip = 0
        /// The last kept bytes, which the last `overlap.count` of those dropped must equal.
        var overlap: [UInt8] = []
        /// Set for a body appended to kept bytes: the length its 206's Content-Range announced.
        var rangedTotal: Int?
        /// Set when this body goes to its key's partial file: the validator its sidecar names.
        var resumable: PartialDownload.Validator?
        /// The whole body's length, when the server said it.
        var total: Int?
        /// Bytes kept from an earlier attempt that this body goes on from.
        var resumedFrom = 0
        /// Why the bytes kept from before were not used.
        var startedOver: String?
        /// Bytes of the file the hasher has seen (once there is a file).
        var hashed = 0
        /// The hash thread holds the hashing of the bytes past `hashed` (a large body).
        var hashing = false
        /// The body stays in its partial file (`keep()`): `discard()` leaves it.
        var kept = false
        /// The count at which the partial is next synced and its sidecar written.
        var checkpoint = PartialDownload.threshold
    }

    /// A body for a temporary file in `folder` (relative to the store's root); `inspector`
    /// looks at its first bytes as they arrive.
    ///
    /// `partial`: the job's own URL may be resumed (`kept`: from these bytes, asked for with
    /// `Range` by the caller).
    package init(
        store: OutputStore, folder: String, maxBytes: Int, inspector: Inspector? = nil,
        partial: PartialDownload.Plan? = nil, blocking: BlockingWork = .shared
    ) {
        self.blocking = blocking
        self.partial = partial
        self.store = store
        self.folder = folder
        self.maxBytes = maxBytes
        self.inspector = inspector
        if inspector == nil { state.withLock { $0.inspected = true } }
    }

    /// Decides, from the final response's head, where its body goes: appended to the kept bytes
    /// (a 206 that starts at or before the byte asked for, for the same length, naming the
    /// validator `If-Range` sent), or from the start (a 200, told to the record); any other
    /// answer to a range request throws `StartOver`. The bytes of an appended 206 before the
    /// kept ones end are compared with those kept as they come (`write`), and one that ends
    /// before its Content-Range says is a cut (`cutShort`).
    public func begin(status: Int, headers: [String: String]) throws {
        let coded = FetchResponseHead.isCoded(headers)
        let length = coded ? nil : headers["content-length"].flatMap { Int($0) }
        guard let partial else {
            if (200..<300).contains(status), let length { state.withLock { $0.total = length } }
            return
        }
        try state.withLock { state in
            if status == 416, partial.kept != nil {
                throw StartOver(description: "the server answered 416 to the range request")
            }
            guard (200..<300).contains(status), state.file == nil, state.count == 0 else { return }
            let validator = coded ? nil : PartialDownload.Validator.strong(in: headers)
            if let kept = partial.kept {
                if status == 206 {
                    try append(to: kept, &state, partial.download, range: ContentRange(headers["content-range"]), coded: coded, headers: headers)
                    return
                }
                if status == 200, let field = headers["content-range"], ContentRange(field)?.start != 0 {
                    throw StartOver(description: "the server answered 200 with Content-Range '\(field)' to the range request")
                }
                state.startedOver = "the server answered \(status) to the range request (the file changed, or ranges are not served): fetched from the start"
                kept.handle.close()  // the new partial replaces the kept one
            }
            state.total = length
            if let validator, (length ?? .max) >= PartialDownload.threshold { state.resumable = validator }
        }
    }

    /// Goes on from the kept bytes, if the 206 allows: throws `StartOver` otherwise.
    private func append(
        to kept: PartialDownload.Kept, _ state: inout State, _ download: PartialDownload, range: ContentRange?, coded: Bool,
        headers: [String: String]
    ) throws {
        guard !coded else { throw StartOver(description: "the server answered the range request with a Content-Encoding") }
        guard let range, let total = range.total else {
            throw StartOver(description: "the server's 206 has no usable Content-Range ('\(headers["content-range"] ?? "")')")
        }
        guard range.start <= kept.askedFrom else {
            throw StartOver(description: "the server's 206 starts at byte \(range.start), after the \(kept.askedFrom) asked for (\(kept.offset) kept)")
        }
        guard range.end == total - 1, kept.total.map({ $0 == total }) ?? true else {
            throw StartOver(description: "the server's 206 ('\(headers["content-range"] ?? "")') does not agree with the \(kept.total.map(String.init) ?? "unknown") bytes known")
        }
        if let disagreement = kept.validator.disagreement(with: headers) { throw StartOver(description: disagreement) }
        guard total <= maxBytes else { throw TooLarge(limit: maxBytes) }
        let folder = try store.openFolder(self.folder)
        state.file = try TemporaryFile(folder: folder, partialName: download.name, handle: kept.handle, keeping: kept.offset)
        state.hasher = kept.hasher
        state.hashed = kept.offset
        state.prefix = kept.prefix
        state.suffix = kept.suffix
        state.count = kept.offset
        state.skip = kept.offset - range.start
        state.overlap = kept.tail
        state.rangedTotal = total
        state.resumedFrom = kept.offset
        state.resumable = kept.validator
        state.total = total
        state.checkpoint = kept.offset + PartialDownload.checkpointInterval
        if !state.inspected, let inspector {
            state.inspected = try inspector(Array(state.prefix.prefix(Self.inspectionLimit))) || state.prefix.count >= Self.inspectionLimit
        }
    }

    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        try state.withLock { state in
            guard !state.discarded else {
                throw OutputStore.WriteError(path: folder, reason: "the payload was already discarded")
            }
            state.received += bytes.count
            var bytes = bytes
            if state.skip > 0 {
                let skipped = min(state.skip, bytes.count)
                try compareOverlap(UnsafeRawBufferPointer(rebasing: bytes[..<skipped]), &state)
                state.skip -= skipped
                bytes = UnsafeRawBufferPointer(rebasing: bytes[skipped...])
                if bytes.isEmpty { return }
            }
            if let total = state.rangedTotal, state.count + bytes.count > total {
                throw StartOver(description: "the server's 206 sent more bytes than its Content-Range announced")
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
            try file(&state).append(bytes)
            state.count += bytes.count
            if state.resumable != nil, state.count >= state.checkpoint { checkpoint(&state) }
            if state.count <= Self.inlineHashLimit {
                state.hasher.update(bytes)
                state.hashed = state.count
            } else if !state.hashing, state.count - state.hashed >= Self.hashStep {
                // A large body: the hash thread reads it back from the page cache and hashes it
                // there, beside the transfer, rather than on the HTTP client's thread.
                state.hashing = true
                blocking.enqueue(on: .hashing) { [self] in catchUpHashing() }
            }
            if state.prefix.count < Self.prefixLimit {
                state.prefix.append(contentsOf: bytes.prefix(Self.prefixLimit - state.prefix.count))
            }
            state.suffix.append(contentsOf: bytes.suffix(Self.suffixLimit))
            if state.suffix.count > Self.suffixLimit { state.suffix.removeFirst(state.suffix.count - Self.suffixLimit) }
        }
    }

    /// Compares bytes the server sent again, before the kept ones end, with the kept ones
    /// (those past the last `overlap.count` are only dropped): a mismatch means the kept bytes
    /// are not the server's file, and the body starts over.
    private func compareOverlap(_ bytes: UnsafeRawBufferPointer, _ state: inout State) throws {
        // `state.skip` bytes are still to drop; the last `overlap.count` of them are compared.
        let uncompared = state.skip - state.overlap.count
        guard bytes.count > uncompared else { return }
        let from = max(0, uncompared)
        let start = state.overlap.count - (state.skip - from)
        let piece = UnsafeRawBufferPointer(rebasing: bytes[from...])
        let same = state.overlap.withUnsafeBytes { kept in
            memcmp(kept.baseAddress! + start, piece.baseAddress!, piece.count) == 0
        }
        guard same else {
            state.resumedFrom = 0  // nothing of the kept bytes is used
            throw StartOver(
                description: "the bytes the server sent again before byte \(state.count) differ from the \(state.overlap.count) kept there (the kept bytes are not the server's file)")
        }
    }

    /// The temporary file, made on first need with everything held in memory so far (the key's
    /// partial file, new, for a body that may be resumed).
    private func file(_ state: inout State) throws -> TemporaryFile {
        if let file = state.file { return file }
        guard !state.discarded else {
            throw OutputStore.WriteError(path: folder, reason: "the payload was already discarded")
        }
        var made: TemporaryFile?
        if state.resumable != nil, let download = partial?.download {
            made = try TemporaryFile.freshPartial(folder: store.openFolder(folder), name: download.name)
            if made == nil {
                // Another attempt writes the key's partial: this body is not kept if cut.
                state.resumable = nil
            } else {
                // The old sidecar goes after any write of it still queued; until then it names
                // the old partial's inode, not this new file's.
                download.removeSidecar(store: store)
            }
        }
        let file = try made ?? store.makeTemporaryFile(in: folder)
        try state.prefix.withUnsafeBytes { held in
            try file.append(held)
            state.hasher.update(held)
            state.hashed = held.count
            state.suffix = Array(held.suffix(Self.suffixLimit))
        }
        state.file = file
        return file
    }

    /// The temporary file holding the body (made now if the body is still in memory).
    package func file() throws -> TemporaryFile {
        try state.withLock { try file(&$0) }
    }

    /// Syncs the partial file on the sidecar writer's thread, then writes its sidecar with the
    /// count of now: the bytes it names are on disk before it names them.
    private func checkpoint(_ state: inout State) {
        state.checkpoint = state.count + PartialDownload.checkpointInterval
        guard let download = partial?.download, let validator = state.resumable, let file = state.file,
            let fd = file.duplicateDescriptor()
        else { return }
        let (store, count, total, inode) = (store, state.count, state.total, file.inode)
        PartialDownload.writer.enqueue {
            let synced = fdatasync(fd) == 0
            close(fd)
            if synced { download.writeSidecar(store: store, bytes: count, inode: inode, validator: validator, total: total) }
        }
    }

    /// Ends a transfer that was cut: a body going to its partial file stays there, synced, its
    /// sidecar naming every byte (for the next attempt to resume); any other is discarded.
    package func keep() async {
        let kept = state.withLock { state -> (PartialDownload, PartialDownload.Validator, TemporaryFile, Int, Int?)? in
            state.discarded = true
            guard let download = partial?.download, let validator = state.resumable, let file = state.file,
                state.count >= PartialDownload.threshold
            else { return nil }
            state.kept = true
            return (download, validator, file, state.count, state.total)
        }
        guard let (download, validator, file, count, total) = kept else {
            discard()
            return
        }
        let store = store
        await PartialDownload.writer.run {
            file.keep {
                download.writeSidecar(store: store, bytes: count, inode: file.inode, validator: validator, total: total)
            }
            store.trimPartials()  // within --keep-partials, the oldest going first
        }
    }

    /// What this transfer did with the bytes kept from before: went on from `resumedFrom` of
    /// them, or started over (`startedOver` says why); `received`: bytes over the network.
    package var transfer: (received: Int, resumedFrom: Int, startedOver: String?) {
        state.withLock { ($0.received, $0.resumedFrom, $0.startedOver) }
    }

    /// Removes the temporary file, if one was made and not committed; later writes fail.
    package func discard() {
        let (file, partial) = state.withLock { state -> (TemporaryFile?, Bool) in
            guard !state.kept else { return (nil, false) }  // the partial stays for the next attempt
            state.discarded = true
            return (state.file, state.resumable != nil)
        }
        file?.discard()
        if partial { removedPartial() }
    }

    /// The body was stored (its file renamed to the payload's path): a partial's sidecar goes.
    package func committed() {
        if state.withLock({ $0.resumable != nil }) { removedPartial() }
    }

    private func removedPartial() {
        partial?.download.removeSidecar(store: store)
    }

    /// A body appended to kept bytes that ended before its 206's Content-Range said: a cut, not
    /// a payload (nil when the body is whole, or was not appended).
    package var cutShort: (count: Int, total: Int)? {
        state.withLock { state in
            guard let total = state.rangedTotal, state.count < total else { return nil }
            return (state.count, total)
        }
    }

    /// Bytes received so far.
    public var count: Int { state.withLock { $0.count } }
    /// The whole body's length, when the server said it (and no content coding hides it).
    package var total: Int? { state.withLock { $0.total } }
    /// The first bytes (up to 512 KiB).
    public var prefix: [UInt8] { state.withLock { $0.prefix } }
    /// The last bytes (up to 64).
    package var suffix: [UInt8] { state.withLock { $0.file == nil ? Array($0.prefix.suffix(Self.suffixLimit)) : $0.suffix } }
    /// The SHA-256 of everything received, in hex (waiting for the hash thread, for a large body,
    /// then hashing what it had not come to); throws when the file cannot be read back.
    public func digest() throws -> String {
        while state.withLock({ $0.hashing }) { usleep(200) }
        let (hasher, file, from, to, prefix) = state.withLock { ($0.hasher, $0.file, $0.hashed, $0.count, $0.prefix) }
        var copy = hasher
        guard let file else {
            copy.update(prefix)
            return copy.finalizeHex()
        }
        if from < to, !Self.hash(file, from: from, to: to, into: &copy) {
            throw OutputStore.WriteError(path: file.path, reason: "the payload could not be read back to hash it")
        }
        return copy.finalizeHex()
    }

    /// Bodies up to this size are hashed as they arrive, on the HTTP client's thread.
    static let inlineHashLimit = 4 << 20
    /// Past it, the hash thread is handed at least this many new bytes at a time.
    static let hashStep = 1 << 20
    /// Where large bodies are hashed, one after the other, beside their transfers.
    /// Where a large body is hashed as it is read back (`BlockingWork.Lane.hashing`).
    private let blocking: BlockingWork

    /// On the hash thread: hashes the file's bytes past `hashed` until it has come to `count`.
    private func catchUpHashing() {
        while true {
            let work = state.withLock { state -> (TemporaryFile, SHA256, Int, Int)? in
                guard let file = state.file, state.hashed < state.count, !state.discarded else {
                    state.hashing = false
                    return nil
                }
                return (file, state.hasher, state.hashed, state.count)
            }
            guard let (file, hashedSoFar, from, to) = work else { return }
            var hasher = hashedSoFar
            guard Self.hash(file, from: from, to: to, into: &hasher) else {
                state.withLock { $0.hashing = false }  // `digest()` tries again, and says so if it cannot
                return
            }
            state.withLock { state in
                state.hasher = hasher
                state.hashed = to
            }
        }
    }

    /// Feeds `hasher` bytes `from..<to` of `file`, read back; false when they could not be read.
    private static func hash(_ file: TemporaryFile, from: Int, to: Int, into hasher: inout SHA256) -> Bool {
        guard let fd = file.duplicateDescriptor() else { return false }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: min(1 << 20, to - from))
        var offset = from
        while offset < to {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, min($0.count, to - offset), off_t(offset)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += n
        }
        return true
    }

    /// The whole body, read back from disk (bounded by maxBytes).
    public func bytes() throws -> [UInt8] {
        if count <= Self.prefixLimit { return prefix }
        return try file().readAll()
    }
}
