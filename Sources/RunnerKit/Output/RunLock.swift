import Foundation
import Glibc

/// One run at a time per output directory: an exclusive `flock` on `<out>/.lock`, which the
/// kernel frees when the holder exits or is killed, so a crashed run never leaves it stuck.
package final class RunLock: Sendable {
    /// Another process holds the lock.
    package struct Busy: Error, CustomStringConvertible {
        package var directory: String
        package var holder: String?
        package var description: String {
            "another runner is using the output directory \(directory)" + (holder.map { " (process \($0))" } ?? "")

        }
    }

    private let fd: Int32

    /// Takes the lock of `store`'s directory; with `wait`, blocks until it is free.
    package init(store: OutputStore, wait: Bool) throws {
        let path = store.root + "/.lock"
        let fd: Int32
        switch LockFile.open(path, mode: 0o644) {
        case .success(let file): fd = file.fd
        case .failure(.open(let code)): throw OutputStore.WriteError(path: path, errno: code)
        case .failure(.notARegularFile): throw OutputStore.WriteError(path: path, reason: "it is not a regular file")
        }
        while flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0 {
            if errno == EINTR { continue }
            let busy = errno == EWOULDBLOCK
            let code = errno
            var buffer = [UInt8](repeating: 0, count: 32)
            let n = read(fd, &buffer, buffer.count)
            close(fd)
            if busy {
                let holder = n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : nil
                throw Busy(directory: store.root, holder: holder?.isEmpty == false ? holder : nil)
            }
            throw OutputStore.WriteError(path: path, errno: code)
        }
        _ = ftruncate(fd, 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, 0) }
        self.fd = fd
    }

    deinit { close(fd) }
}
