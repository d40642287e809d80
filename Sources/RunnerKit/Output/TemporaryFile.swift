import Foundation
import Glibc
import Synchronization

/// A hidden file (`.tmp-…`) that becomes a payload by rename, or disappears: when discarded,
/// and at the latest when the value is released, so no temporary file outlives its job.
public final class TemporaryFile: Sendable {
    public let path: String
    private let state: Mutex<(fd: Int32, done: Bool)>

    init(folder: String) throws {
        var template = Array("\(folder)/.tmp-XXXXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw OutputStore.WriteError(path: folder, errno: errno)
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        self.path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        self.state = Mutex((fd, false))
    }

    deinit { discard() }

    /// Appends bytes; a short write (a full disk) throws with the system's reason.
    public func append(_ bytes: UnsafeRawBufferPointer) throws {
        try state.withLock { state in
            guard !state.done else { throw OutputStore.WriteError(path: path, reason: "the temporary file was already removed") }
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(state.fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw OutputStore.WriteError(path: (path as NSString).deletingLastPathComponent, errno: errno)
                }
                offset += n
            }
        }
    }

    public func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try append($0) }
    }

    /// Reads the whole file back (for payloads that must be parsed, bounded by maxBytes).
    public func readAll() throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw OutputStore.WriteError(path: path, reason: "could not read the temporary file back")
        }
        return [UInt8](data)
    }

    /// Renames to `target`. Atomic against a crash of the process (readers see the old file or
    /// the new one, never half); not fsync'd, so a power loss may lose the latest writes.
    func commit(to target: String) throws {
        try state.withLock { state in
            guard !state.done else { throw OutputStore.WriteError(path: target, reason: "the temporary file is gone") }
            if close(state.fd) != 0 {
                state.done = true
                unlink(path)
                throw OutputStore.WriteError(path: target, errno: errno)
            }
            state.done = true
            if rename(path, target) != 0 {
                let code = errno
                unlink(path)
                throw OutputStore.WriteError(path: target, errno: code)
            }
        }
    }

    /// Removes the file unless it was committed. Safe to call more than once.
    public func discard() {
        state.withLock { state in
            guard !state.done else { return }
            close(state.fd)
            unlink(path)
            state.done = true
        }
    }
}
