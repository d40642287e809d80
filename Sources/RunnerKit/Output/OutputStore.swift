import Foundation
import Glibc

/// The output directory: payloads, result records and run logs, all written atomically
/// (a temporary file in the same folder, then rename), and never outside the directory.
///
/// ```
/// out/
///   images/ trees/ entries/ lists/   payloads
///   results/<name>.json              the last result of each key
///   runs/<run-id>.jsonl              one line per finished job of one run
/// ```
public final class OutputStore: Sendable {
    /// A write that failed, in words a user can act on.
    public struct WriteError: Error, CustomStringConvertible {
        public var path: String
        public var reason: String
        public var description: String { "could not write \(path): \(reason)" }
    }

    /// The output directory, absolute.
    public let root: String

    public init(root: String) throws {
        let absolute = root.hasPrefix("/") ? root : FileManager.default.currentDirectoryPath + "/" + root
        self.root = (absolute as NSString).standardizingPath
        try Self.makeDirectory(self.root)
        try Self.makeDirectory(self.root + "/results")
    }

    /// The absolute path of a payload path relative to the root.
    public func absolute(_ relativePath: String) -> String { root + "/" + relativePath }

    // MARK: - Payloads

    /// A new, empty temporary file in the folder `relativeFolder` (created on demand).
    public func makeTemporaryFile(in relativeFolder: String) throws -> TemporaryFile {
        let folder = relativeFolder.isEmpty ? root : absolute(relativeFolder)
        try Self.makeDirectory(folder)
        return try TemporaryFile(folder: folder)
    }

    /// Moves a complete temporary file to `relativePath`, replacing what was there
    /// (a symlink there is replaced, never written through).
    public func commit(_ file: TemporaryFile, to relativePath: String) throws {
        let target = absolute(relativePath)
        try Self.makeDirectory((target as NSString).deletingLastPathComponent)
        try file.commit(to: target)
    }

    /// Writes `bytes` to `relativePath` atomically.
    public func write(_ bytes: [UInt8], to relativePath: String) throws {
        let folder = (relativePath as NSString).deletingLastPathComponent
        let file = try makeTemporaryFile(in: folder)
        try file.append(bytes)
        try commit(file, to: relativePath)
    }

    public func fileExists(_ relativePath: String) -> Bool {
        var info = stat()
        return lstat(absolute(relativePath), &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    // MARK: - Records

    /// `results/<name>.json` for a key.
    public func recordPath(forKey key: String) -> String { "results/\(Self.fileName(forKey: key)).json" }

    /// Writes the key's last result atomically.
    public func writeRecord(_ result: JobResult) throws {
        var bytes = JSONWriter.data(result.json, pretty: true)
        bytes.append(0x0A)
        try write(bytes, to: recordPath(forKey: result.key))
    }

    /// The key's last result record, if one exists and parses.
    public func readRecord(forKey key: String) -> JSONValue? {
        guard let data = FileManager.default.contents(atPath: absolute(recordPath(forKey: key))) else { return nil }
        return try? JSONParser.parse([UInt8](data))
    }

    // MARK: - Names

    /// A key made filename-safe: letters, digits and `._-` stay; anything else becomes `_`.
    /// When that changed the key (or it was long), a short hash of the key is appended, so two
    /// different keys never share a file.
    public static func fileName(forKey key: String) -> String {
        var out = ""
        var changed = false
        for scalar in key.unicodeScalars {
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", ".", "_", "-": out.unicodeScalars.append(scalar)
            default:
                out.append("_")
                changed = true
            }
        }
        if out.hasPrefix(".") {
            out = "_" + out.dropFirst()
            changed = true
        }
        if out.utf8.count > 100 {
            out = String(out.prefix(100))
            changed = true
        }
        if out.isEmpty { changed = true }
        if changed { out += "-" + String(SHA256.hex(Array(key.utf8)).prefix(10)) }
        return out
    }

    // MARK: - Helpers

    static func makeDirectory(_ path: String) throws {
        var info = stat()
        if stat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else { throw WriteError(path: path, reason: "it exists and is not a directory") }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw WriteError(path: path, reason: "could not create the directory (\(String(cString: strerror(errno))))")
        }
    }
}
