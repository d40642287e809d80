import Foundation
import Glibc

/// The few file-system calls the spool is built on, with errors in words.
enum FileSystem {
    /// A failed call, with the path and the system's reason.
    struct Failure: Error, CustomStringConvertible {
        var path: String
        var reason: String
        var code: Int32
        var description: String { "\(path): \(reason)" }

        init(_ path: String, code: Int32 = errno) {
            self.path = path
            self.code = code
            self.reason = String(cString: strerror(code))
        }

        init(path: String, reason: String, code: Int32) {
            self.path = path
            self.reason = reason
            self.code = code
        }
    }

    enum EntryType: Sendable {
        case regular, directory, symlink, other
    }

    struct Entry: Sendable {
        var type: EntryType
        var size: Int
        /// Last change of the inode (a rename sets it): when the file arrived.
        var changed: timespec
        var modified: timespec
    }

    /// What is at `path`, without following a symlink; nil when nothing is.
    static func entry(_ path: String) -> Entry? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        let type: EntryType
        switch info.st_mode & S_IFMT {
        case S_IFREG: type = .regular
        case S_IFDIR: type = .directory
        case S_IFLNK: type = .symlink
        default: type = .other
        }
        return Entry(type: type, size: Int(info.st_size), changed: info.st_ctim, modified: info.st_mtim)
    }

    /// The names in a folder, `.` and `..` left out; empty when it cannot be read. A name that is
    /// not UTF-8 is left out, and handed to `notUTF8` as its bytes.
    static func names(in folder: String, notUTF8: (([UInt8]) -> Void)? = nil) -> [String] {
        FolderReader.names(in: folder, notUTF8: notUTF8)
    }

    /// Renames the entry whose name in `folder` is the bytes `raw` (not UTF-8) to `target`,
    /// unless something is there.
    static func moveNoReplace(raw: [UInt8], in folder: String, to target: String) throws(Failure) {
        let source = Array(folder.utf8) + [UInt8(ascii: "/")] + raw + [0]
        let result = source.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars -> Int32 in
                if let renameat2 = renameat2, renameat2(AT_FDCWD, chars.baseAddress!, AT_FDCWD, target, 1) == 0 { return 0 }
                if entry(target) != nil {
                    errno = EEXIST
                    return -1
                }
                return rename(chars.baseAddress!, target)
            }
        }
        guard result == 0 else { throw Failure(target) }
    }

    /// Makes the folder `path` with `mode` (umask aside) and `group`; one that exists keeps its
    /// mode unless a group is given. With `parents`, missing folders on the way are made 0755.
    static func makeFolder(_ path: String, mode: mode_t = 0o700, group: gid_t? = nil, parents: Bool = false) throws(Failure) {
        if mkdir(path, mode) == 0 {
            if let group, chown(path, uid_t.max, group) != 0 { throw Failure(path) }
            guard chmod(path, mode) == 0 else { throw Failure(path) }
            return
        }
        if errno == ENOENT, parents {
            let parent = (path as NSString).deletingLastPathComponent
            if parent != path, !parent.isEmpty {
                try makeFolder(parent, mode: 0o755, parents: true)
                return try makeFolder(path, mode: mode, group: group)
            }
        }
        guard errno == EEXIST else { throw Failure(path) }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { throw Failure(path, code: ENOTDIR) }
        if let group, info.st_gid != group || info.st_mode & 0o7777 != mode {
            guard chown(path, uid_t.max, group) == 0, chmod(path, mode) == 0 else { throw Failure(path) }
        }
    }

    /// Up to `cap` bytes of the regular file at `path`, opened without following a link and
    /// without blocking (a FIFO, a device or a socket planted there is refused, not waited on);
    /// nil when it is not a regular file or cannot be read.
    static func readSmall(_ path: String, cap: Int = 4096) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        var bytes = [UInt8](repeating: 0, count: min(cap, max(0, Int(info.st_size))))
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            count += n
        }
        return Array(bytes[0..<count])
    }

    /// Renames `source` to `target`, replacing what is there.
    static func move(_ source: String, to target: String) throws(Failure) {
        guard rename(source, target) == 0 else { throw Failure(source) }
    }

    /// Renames `source` to `target` unless something is there already: `EEXIST` then.
    /// renameat2(RENAME_NOREPLACE) where the kernel and file system have it, else link and
    /// unlink (files) or a check before the rename (folders).
    static func moveNoReplace(_ source: String, to target: String) throws(Failure) {
        if let renameat2 = renameat2 {
            if renameat2(AT_FDCWD, source, AT_FDCWD, target, 1) == 0 { return }  // RENAME_NOREPLACE
            guard errno == EINVAL || errno == ENOSYS else { throw Failure(errno == EEXIST ? target : source) }
        }
        if entry(source)?.type != .directory {
            if link(source, target) == 0 {
                unlink(source)
                return
            }
            guard errno == EPERM || errno == EXDEV else { throw Failure(errno == EEXIST ? target : source) }
        }
        guard entry(target) == nil else { throw Failure(target, code: EEXIST) }
        try move(source, to: target)
    }

    /// Moves `source` into `folder` under its own name, or under `name-2.ext`, `name-3.ext`…
    /// when that is taken; returns the name used.
    @discardableResult
    static func moveKeepingBoth(_ source: String, into folder: String, name: String, beside suffixes: [String] = []) throws(Failure) -> String {
        var attempt = 1
        while true {
            let candidate = numbered(name, attempt)
            attempt += 1
            if suffixes.contains(where: { entry("\(folder)/\(candidate)\($0)") != nil }) { continue }
            do {
                try moveNoReplace(source, to: "\(folder)/\(candidate)")
                return candidate
            } catch {
                guard error.code == EEXIST else { throw error }
            }
        }
    }

    /// `name` for 1, else `stem-N.ext`.
    static func numbered(_ name: String, _ n: Int) -> String {
        guard n > 1 else { return name }
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            return "\(name[..<dot])-\(n)\(name[dot...])"
        }
        return "\(name)-\(n)"
    }

    /// Writes `bytes` to `path` through a temporary file in the same folder (`TemporaryFile`,
    /// the output store's writer), durably: fsync before the rename, and of the folder after.
    /// `durable: false` skips the fsyncs (a file rewritten often that nothing depends on).
    static func writeAtomically(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600, durable: Bool = true) throws(Failure) {
        let folderPath = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let fd = open(folderPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(folderPath) }
        let folder = OutputStore.Folder(fd: fd, path: folderPath)
        do {
            let file = try TemporaryFile(folder: folder, mode: mode)
            try file.append(bytes)
            try file.commit(to: folder, name: name, durable: durable)
        } catch let error as OutputStore.WriteError {
            throw Failure(path: path, reason: error.reason, code: error.code ?? EIO)
        } catch {
            throw Failure(path: path, reason: "\(error)", code: EIO)
        }
    }

    static func seconds(_ time: timespec) -> Double { Double(time.tv_sec) + Double(time.tv_nsec) / 1e9 }

    static func now() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time
    }

    // MARK: - renameat2

    private typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32

    /// Glibc has renameat2 since 2.28, but its module does not import it.
    private static let renameat2: RenameAt2? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "renameat2") else { return nil }
        return unsafeBitCast(symbol, to: RenameAt2.self)
    }()
}
