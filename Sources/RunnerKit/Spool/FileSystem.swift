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

    /// The names in a folder, `.` and `..` left out; empty when it cannot be read.
    static func names(in folder: String) -> [String] {
        guard let directory = opendir(folder) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func makeFolder(_ path: String) throws(Failure) {
        if mkdir(path, 0o755) == 0 || errno == EEXIST {
            guard entry(path)?.type == .directory else { throw Failure(path, code: ENOTDIR) }
            return
        }
        throw Failure(path)
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

    /// Writes `bytes` to `path` through a dot-named temporary file in the same folder.
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws(Failure) {
        let folder = (path as NSString).deletingLastPathComponent
        let temporary = "\(folder)/.tmp-\(UUID().uuidString)"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Failure(temporary) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let failure = Failure(path)
                close(fd)
                unlink(temporary)
                throw failure
            }
            offset += n
        }
        fsync(fd)
        close(fd)
        do {
            try move(temporary, to: path)
        } catch {
            unlink(temporary)
            throw error
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
