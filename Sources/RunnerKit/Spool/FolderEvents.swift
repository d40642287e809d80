import Foundation
import Glibc
import Synchronization

/// Names that arrive in watched folders, from inotify, as an `AsyncStream`.
///
/// A thread blocks in `poll` on the inotify descriptor and a wake pipe; each `IN_MOVED_TO` or
/// `IN_CLOSE_WRITE` yields the folder, the name and whether it was a rename, and `IN_Q_OVERFLOW`
/// (events were lost) yields `.overflow`, after which the reader must rescan (as it must for a
/// name that is not UTF-8, which only a rescan handles). `stop()` wakes the thread and ends the stream.
final class FolderEvents: Sendable {
    enum Event: Sendable, Equatable {
        /// `renamed`: it arrived by a rename (complete); else it was closed after a write.
        case arrived(folder: String, name: String, renamed: Bool)
        case overflow
    }

    let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let inotify: Int32
    private let wakeReader: Int32
    private let wakeWriter: Int32
    private let folders: Mutex<[Int32: String]>

    /// Watches `folders`; nil when inotify cannot be used (the caller then polls).
    init?(folders paths: [String]) {
        let inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard inotify >= 0 else { return nil }
        var watched: [Int32: String] = [:]
        for path in paths {
            let wd = inotify_add_watch(inotify, path, UInt32(IN_MOVED_TO | IN_CLOSE_WRITE))
            guard wd >= 0 else {
                close(inotify)
                return nil
            }
            watched[wd] = path
        }
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else {
            close(inotify)
            return nil
        }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        self.inotify = inotify
        self.wakeReader = pipeEnds[0]
        self.wakeWriter = pipeEnds[1]
        self.folders = Mutex(watched)
        (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)

        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        guard pthread_create(&thread, nil, { context in
            let events = Unmanaged<FolderEvents>.fromOpaque(context!).takeRetainedValue()
            events.run()
            return nil
        }, context) == 0 else {
            Unmanaged<FolderEvents>.fromOpaque(context).release()
            close(inotify)
            close(pipeEnds[0])
            close(pipeEnds[1])
            return nil
        }
        pthread_detach(thread)
    }

    /// Ends the stream and the thread.
    func stop() {
        var byte: UInt8 = 1
        _ = write(wakeWriter, &byte, 1)
    }

    private func run() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 8)
        defer {
            buffer.deallocate()
            continuation.finish()
            close(inotify)
            close(wakeReader)
            close(wakeWriter)
        }
        while true {
            var descriptors = [
                pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0),
                pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
            ]
            if poll(&descriptors, 2, -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            if descriptors[0].revents != 0 { return }
            guard descriptors[1].revents != 0 else { continue }
            while true {
                let count = read(inotify, buffer.baseAddress!, buffer.count)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                parse(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            }
        }
    }

    /// `struct inotify_event { int wd; uint32_t mask, cookie, len; char name[]; }`
    private func parse(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        let header = 16
        while offset + header <= bytes.count {
            let wd = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameBytes = bytes[(offset + header)..<min(bytes.count, offset + header + length)]
            offset += header + length
            if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                continuation.yield(.overflow)
                continue
            }
            guard let folder = folders.withLock({ $0[wd] }), length > 0 else { continue }
            guard let name = String(validating: nameBytes.prefix(while: { $0 != 0 }), as: UTF8.self) else {
                continuation.yield(.overflow)
                continue
            }
            continuation.yield(.arrived(folder: folder, name: name, renamed: mask & UInt32(IN_MOVED_TO) != 0))
        }
    }
}
