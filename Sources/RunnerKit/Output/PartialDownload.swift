import Foundation
import Glibc
import Synchronization

/// A large body cut before its end, kept so that the next attempt asks only for the rest.
///
/// The bytes go to a hidden file beside where the payload goes (`.partial-<hash of the key>`),
/// and a sidecar (the same name and `.json`) says whose they are and how many are known to be on
/// disk: the key, the URL, the validator the server sent, the total length when it was told, the
/// partial's inode, and a byte count written only after an `fdatasync` of the partial (when the
/// body passes 1 MiB, then every 16 MiB, and when the attempt ends cut). So after any crash, kill
/// -9 included, the next attempt, the next run or another watcher sharing the output resumes from
/// the smaller of the sidecar's count and the file's size, and at most 16 MiB (and what was on its way) come again.
///
/// A resume sends `Range: bytes=M-`, M being 64 KiB before the kept bytes end, and `If-Range`
/// with a strong validator only (an ETag not marked `W/`, or a Last-Modified at least a second
/// older than the answer's Date); a body without one, or with a Content-Encoding, is never kept.
/// Which answers are appended and which start over is `Payload.begin(status:headers:)`'s to
/// decide; the bytes before the kept ones end must equal those kept (`Payload.write`).
///
/// An output may be shared, so the partial is not trusted for being there: `load` opens it once
/// and checks that descriptor (a regular file, one link, the runner's owner, the sidecar's inode),
/// takes an exclusive `flock` on it, and hands that same descriptor to the file appended to. One
/// attempt at a time writes a partial: another finds the lock taken and leaves the partial alone
/// (`Loaded.busy`, `TemporaryFile.freshPartial`).
///
/// A fresh partial is a new file, renamed over the old one while the old one's lock is held,
/// its old sidecar removed, so a sidecar left by an earlier body of the key can never describe
/// it: their inodes differ. `--keep-partials` bounds the bytes all partials of an output keep
/// (`OutputStore.trimPartials`).
package struct PartialDownload: Sendable {
    /// The start of every partial's name (and its sidecar's).
    package static let prefix = ".partial-"
    /// `runner prune` removes a partial (and its sidecar) untouched for this long.
    package static let keptFor = Duration.seconds(7 * 24 * 3600)
    /// The bytes all kept partials of an output may take together, unless `--keep-partials`
    /// says otherwise.
    package static let defaultBudget = 1 << 30
    /// A cut body smaller than this is not kept.
    package static let threshold = 1 << 20
    /// How many bytes pass between two syncs of a partial and its sidecar.
    package static let checkpointInterval = 16 << 20

    /// The payload's folder, relative to the output root.
    let folder: String
    /// The partial's file name in `folder`.
    package let name: String
    let key: String
    /// The job's URL (made text only when a sidecar is read or written).
    let url: URL

    package var sidecarName: String { name + ".json" }

    /// Made for every job whose body may be large: one allocation (the name), no more.
    package init(folder: String, key: String, url: URL) {
        self.folder = folder
        self.key = key
        self.url = url
        self.name = Self.name(forKey: key)
    }

    /// A validator `If-Range` may carry.
    package enum Validator: Sendable, Equatable {
        case etag(String)
        case lastModified(String)

        var headerValue: String {
            switch self {
            case .etag(let tag): tag
            case .lastModified(let date): date
            }
        }

        /// The strong validator of a response (header names in lower case): its ETag unless weak,
        /// else its Last-Modified when at least a second older than its Date (a file modified in
        /// the second it was sent may change again within that second).
        static func strong(in headers: [String: String]) -> Validator? {
            if let etag = headers["etag"]?.trimmingSpaces, !etag.isEmpty {
                guard !etag.hasPrefix("W/"), Validators(etag: etag, lastModified: nil) != nil else { return nil }
                return .etag(etag)
            }
            guard let modified = headers["last-modified"]?.trimmingSpaces, let date = headers["date"],
                let modifiedAt = HTTPDate.seconds(modified), let sentAt = HTTPDate.seconds(date), sentAt - modifiedAt >= 1,
                Validators(etag: nil, lastModified: modified) != nil
            else { return nil }
            return .lastModified(modified)
        }

        /// Why a 206's own validator is not this one (nil: it is): a 206 that names no version
        /// of the file, or another one, is not appended, whatever `If-Range` asked.
        func disagreement(with headers: [String: String]) -> String? {
            let (field, value) = switch self {
            case .etag(let tag): ("ETag", tag)
            case .lastModified(let date): ("Last-Modified", date)
            }
            guard let sent = headers[field.lowercased()]?.trimmingSpaces, !sent.isEmpty else {
                return "the server's 206 names no version of the file (no \(field)), so it may be of another one than the bytes kept"
            }
            return sent == value ? nil : "the server's 206 names another version of the file than the one kept"
        }

        var json: JSONValue {
            switch self {
            case .etag(let tag): .object([("etag", .string(tag))])
            case .lastModified(let date): .object([("lastModified", .string(date))])
            }
        }

        /// From a sidecar, checked as a record's validators are (no control character, not too
        /// long: it goes back to the server in `If-Range`), and strong: a sidecar is a file anyone
        /// sharing the output may have written.
        init?(json: JSONValue?) {
            if let tag = json?["etag"]?.stringValue {
                guard !tag.hasPrefix("W/"), Validators(etag: tag, lastModified: nil) != nil else { return nil }
                self = .etag(tag)
            } else if let date = json?["lastModified"]?.stringValue {
                guard HTTPDate.seconds(date) != nil, Validators(etag: nil, lastModified: date) != nil else { return nil }
                self = .lastModified(date)
            } else {
                return nil
            }
        }
    }

    /// Where a resumable body goes, and what is kept of it from before (nil: nothing to resume).
    package typealias Plan = (download: PartialDownload, kept: Kept?)

    /// How many of the kept bytes a resume asks for again, to compare them with what the server
    /// sends: kept bytes that are not the server's (planted by a neighbour of a shared output,
    /// or of another file) are never gone on from.
    package static let overlap = 64 * 1024

    /// What a kept partial gives the next attempt: the partial itself, open and locked (the
    /// descriptor the checks were made on, and the one appended to), where to go on from, and
    /// the hash, first and last bytes of what is kept (read back once, before the request).
    package struct Kept: Sendable {
        package var offset: Int
        package var validator: Validator
        package var total: Int?
        var hasher: SHA256
        var prefix: [UInt8]
        var suffix: [UInt8]
        /// The last kept bytes (up to `overlap`), which the resume asks for again.
        var tail: [UInt8]
        /// The partial's descriptor and its lock, until the attempt's file takes them.
        let handle: Handle

        /// The first byte asked for: a little before the kept ones end.
        package var askedFrom: Int { offset - tail.count }

        /// The request headers of the resume.
        package var requestHeaders: [(name: String, value: String)] {
            [("Range", "bytes=\(askedFrom)-"), ("If-Range", validator.headerValue)]
        }
    }

    /// An open partial file and the exclusive lock on it (`flock`), held while one attempt
    /// writes it: the lock goes with the descriptor, when it is closed or handed on.
    package final class Handle: Sendable {
        private let fd: Mutex<Int32>
        let inode: Int

        init(fd: Int32, inode: Int) {
            self.fd = Mutex(fd)
            self.inode = inode
        }

        deinit { close() }

        /// Hands the descriptor (and its lock) on; nil once taken or closed.
        func take() -> Int32? {
            fd.withLock { fd in
                defer { fd = -1 }
                return fd >= 0 ? fd : nil
            }
        }

        /// Closes the descriptor, letting go of the lock, unless it was handed on.
        package func close() {
            if let fd = take() { Glibc.close(fd) }
        }
    }

    /// What `load` found.
    package enum Loaded: Sendable {
        /// Bytes to resume from, the partial locked.
        case kept(Kept)
        /// Nothing this attempt may resume: a body of the key may start a new partial.
        case none
        /// Another attempt is writing the key's partial: this one neither resumes nor touches
        /// it, and stores its body through an ordinary temporary file.
        case busy
    }

    /// The partial kept for this key and URL, checked, locked, read back and hashed. `.none` when
    /// there is none to resume: no sidecar, another key or URL, a validator that may not be sent,
    /// fewer bytes than the threshold, or a partial that is not one the runner made (not a
    /// regular file, more than one link, another owner, another inode than the sidecar's).
    /// Blocks on the disk: not on the HTTP client's thread.
    func load(store: OutputStore) -> Loaded {
        guard let folderFD = try? store.openFolder(folder),
            let text = OutputStore.readFile(in: folderFD.fd, sidecarName), let sidecar = try? JSONParser.parse(text),
            sidecar["key"]?.stringValue == key, sidecar["url"]?.stringValue == url.absoluteString,
            let validator = Validator(json: sidecar["validator"]), let bytes = sidecar["bytes"]?.intValue,
            let inode = sidecar["inode"]?.intValue
        else { return .none }
        // Opened once, without following a link and without waiting on a FIFO; every check is
        // made on this descriptor, and it is the one written to.
        let fd = openat(folderFD.fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return .none }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_nlink == 1, info.st_uid == geteuid(),
            Int(info.st_ino) == inode
        else {
            close(fd)
            return .none
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return .busy
        }
        // Locked: the name must still be this file (not replaced while the lock was taken).
        var named = stat()
        guard fstatat(folderFD.fd, name, &named, AT_SYMLINK_NOFOLLOW) == 0, named.st_ino == info.st_ino, named.st_dev == info.st_dev else {
            close(fd)
            return .none
        }
        let handle = Handle(fd: fd, inode: inode)
        let offset = min(bytes, Int(info.st_size))
        let total = sidecar["total"]?.intValue
        guard offset >= Self.threshold, total.map({ offset < $0 }) ?? true else { return .none }
        var kept = Kept(
            offset: offset, validator: validator, total: total, hasher: SHA256(), prefix: [], suffix: [], tail: [], handle: handle)
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var done = 0
        while done < offset {
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, min($0.count, offset - done), off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return .none }
            chunk.withUnsafeBytes { kept.hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            if kept.prefix.count < Payload.prefixLimit {
                kept.prefix.append(contentsOf: chunk[0..<min(n, Payload.prefixLimit - kept.prefix.count)])
            }
            kept.tail.append(contentsOf: chunk[0..<n].suffix(Self.overlap))
            if kept.tail.count > Self.overlap { kept.tail.removeFirst(kept.tail.count - Self.overlap) }
            done += n
        }
        kept.suffix = Array(kept.tail.suffix(Payload.suffixLimit))
        return .kept(kept)
    }

    /// Whether the key has a sidecar in the folder: one look on disk (no read; its name made on
    /// the stack), or none once the store lists the folder's sidecars (`listsSidecars()`).
    func hasSidecar(store: OutputStore) -> Bool {
        guard store.mayHoldSidecar(ofPartial: name, in: folder), let folderFD = try? store.openFolder(folder) else { return false }
        var name = name
        return name.withUTF8 { bytes in
            withUnsafeTemporaryAllocation(of: CChar.self, capacity: bytes.count + 6) { path in
                for (index, byte) in bytes.enumerated() { path[index] = CChar(bitPattern: byte) }
                for (index, byte) in ".json\0".utf8.enumerated() { path[bytes.count + index] = CChar(bitPattern: byte) }
                return faccessat(folderFD.fd, path.baseAddress!, F_OK, AT_SYMLINK_NOFOLLOW) == 0
            }
        }
    }

    /// Writes the sidecar (atomically): `bytes` of the file with `inode` are on disk.
    func writeSidecar(store: OutputStore, bytes: Int, inode: Int, validator: Validator, total: Int?) {
        let sidecar = JSONValue.object([
            ("key", .string(key)), ("url", .string(url.absoluteString)), ("validator", validator.json),
            ("bytes", JSONValue(bytes)), ("total", total.map { JSONValue($0) } ?? .null), ("inode", JSONValue(inode)),
        ])
        var text = JSONWriter.data(sidecar)
        text.append(0x0A)
        guard (try? store.write(text, to: folder.isEmpty ? sidecarName : folder + "/" + sidecarName)) != nil else { return }
        store.sidecarWritten(ofPartial: name, in: folder)
        store.partialCheckpointed(key: key)
    }

    /// Removes the sidecar and then the partial, after the writes of the sidecar still queued.
    func remove(store: OutputStore) { unlink([sidecarName, name], store: store) }

    /// Removes the sidecar, after the writes of it still queued.
    func removeSidecar(store: OutputStore) { unlink([sidecarName], store: store) }

    private func unlink(_ names: [String], store: OutputStore) {
        let folder = folder
        Self.writer.enqueue {
            guard let folderFD = try? store.openFolder(folder) else { return }
            for name in names { unlinkat(folderFD.fd, name, 0) }
        }
    }

    /// Where sidecar writes and the syncs before them run, in order, off the HTTP clients'
    /// threads (`BlockingWork.Lane.partials`).
    static var writer: BlockingWork.Queue {
        used.store(true, ordering: .relaxed)
        return BlockingWork.shared.lane(.partials)
    }
    private static let used = Atomic<Bool>(false)

    /// Returns once the sidecar writes and removals queued so far are done: a run calls it before
    /// it ends, so that none is lost with the process.
    package static func settle() async {
        guard used.load(ordering: .relaxed) else { return }
        await BlockingWork.shared.after(.partials)
    }

    /// `.partial-` and 64 bits of FNV-1a of the key in hex: a file name for the key (the sidecar
    /// names the key itself), made in one allocation.
    package static func name(forKey key: String) -> String {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            value ^= UInt64(byte)
            value = value &* 0x100_0000_01b3
        }
        let start = prefix.utf8.count
        return String(unsafeUninitializedCapacity: start + 16) { buffer in
            for (index, byte) in prefix.utf8.enumerated() { buffer[index] = byte }
            for index in 0..<16 {
                let digit = UInt8((value >> (60 - 4 * UInt64(index))) & 0xF)
                buffer[start + index] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
            }
            return start + 16
        }
    }
}

/// `Content-Range: bytes START-END/TOTAL` of a 206 (or of a 200 that should not carry one).
struct ContentRange: Equatable {
    var start: Int
    var end: Int
    /// Nil when the server wrote `*`.
    var total: Int?

    init?(_ field: String?) {
        guard let field = field?.trimmingSpaces, field.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = field.dropFirst("bytes ".count)
        let parts = spec.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let start = Int(bounds[0]), let end = Int(bounds[1]), start >= 0, end >= start else { return nil }
        self.start = start
        self.end = end
        if parts[1] == "*" {
            total = nil
        } else {
            guard let total = Int(parts[1]), total > end else { return nil }
            self.total = total
        }
    }
}

/// Dates of HTTP fields (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), as seconds since 1970.
enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Nil for any other form (the obsolete RFC 850 and asctime forms are not validators worth trusting).
    static func seconds(_ text: String) -> Int? {
        let fields = text.trimmingSpaces.split(separator: " ")
        guard fields.count == 6, fields[0].hasSuffix(","), fields[5] == "GMT", let day = Int(fields[1]),
            let month = months.firstIndex(of: String(fields[2])), let year = Int(fields[3])
        else { return nil }
        let clock = fields[4].split(separator: ":")
        guard clock.count == 3, let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
            (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Int(timegm(&parts))
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        var scalars = Substring(self)
        while scalars.first == " " || scalars.first == "\t" { scalars.removeFirst() }
        while scalars.last == " " || scalars.last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
