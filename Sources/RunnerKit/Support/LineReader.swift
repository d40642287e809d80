import Glibc

/// Reads a file line by line in fixed-size chunks, so memory stays flat however long the file.
package final class LineReader {
    package struct LineTooLong: Error { package var line: Int }

    private let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var eof = false
    private let maxLineLength: Int
    /// The 1-based number of the line `next()` returned last.
    package private(set) var lineNumber = 0

    /// Opens `path`; returns nil with `errno` set when it cannot.
    package init?(path: String, maxLineLength: Int = 16 << 20) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.maxLineLength = maxLineLength
    }

    /// Reads the file open as `fd`, which it then owns (and closes).
    package init(descriptor fd: Int32, maxLineLength: Int = 16 << 20) {
        self.fd = fd
        self.maxLineLength = maxLineLength
    }

    deinit { close(fd) }

    /// The next line without its line break (a trailing `\r` is dropped too), or nil at the end.
    package func next() throws -> ArraySlice<UInt8>? {
        while true {
            if let newline = newlineIndex() {
                var end = newline
                if end > start, buffer[end - 1] == 0x0D { end -= 1 }
                let line = buffer[start..<end]
                start = newline + 1
                lineNumber += 1
                return line
            }
            if buffer.count - start > maxLineLength { throw LineTooLong(line: lineNumber + 1) }
            if eof {
                guard start < buffer.count else { return nil }
                var end = buffer.count
                if buffer[end - 1] == 0x0D { end -= 1 }
                let line = buffer[start..<end]
                start = buffer.count
                lineNumber += 1
                return line
            }
            fill()
        }
    }

    /// The index of the first line feed at or after `start`.
    private func newlineIndex() -> Int? {
        buffer.withUnsafeBufferPointer { bytes -> Int? in
            guard start < bytes.count, let base = bytes.baseAddress,
                let found = memchr(base + start, 0x0A, bytes.count - start)
            else { return nil }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
    }

    private func fill() {
        if start > 0 {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        let chunk = 256 * 1024
        let oldCount = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: chunk))
        let n = buffer.withUnsafeMutableBytes { raw in
            read(fd, raw.baseAddress! + oldCount, chunk)
        }
        buffer.removeSubrange((oldCount + max(n, 0))...)
        if n <= 0 { eof = true }
    }
}
