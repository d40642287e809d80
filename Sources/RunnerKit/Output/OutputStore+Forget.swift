import Foundation
import Glibc

extension OutputStore {
    /// What `forget` removed for one key.
    public struct Forgotten: Sendable {
        public var key: String
        public var removed: [String]
    }

    /// Removes a key's record (with its validators), its payload and the bytes a cut transfer of
    /// it kept (`.partial-…` and its sidecar, wherever in the output directory), so the next run
    /// fetches afresh. Returns nil when the key has no record. Every file is removed through its
    /// folder's descriptor, opened level by level from the output directory's without following
    /// links: a link on the way is never followed, and nothing outside the directory is touched.
    public func forget(key: String) -> Forgotten? {
        let recordPath = recordPath(forKey: key)
        guard let results = openExistingFolder("results"), Self.isRegularFile(Self.recordFileName(forKey: key), in: results.fd)
        else { return nil }
        var removed: [String] = []
        if let output = readRecord(forKey: key)?["output"]?.stringValue,
            (try? OutputStore.validateOutput(output)) == output, removeFile(output)
        {
            removed.append(output)
        }
        removed += removeKeptPartial(forKey: key)
        if unlinkat(results.fd, Self.recordFileName(forKey: key), 0) == 0 { removed.append(recordPath) }
        return Forgotten(key: key, removed: removed)
    }

    /// Whether `name` in the folder open as `folder` is a regular file (a link is not followed).
    static func isRegularFile(_ name: String, in folder: Int32) -> Bool {
        var info = stat()
        return fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    /// Removes the bytes a cut transfer of `key` kept, and their sidecar, in any payload folder
    /// of the output directory (a pair whose sidecar names another key, whose name has the same
    /// hash, is left), each through the descriptor its folder was listed by; answers their
    /// relative paths, sorted.
    private func removeKeptPartial(forKey key: String) -> [String] {
        let name = PartialDownload.name(forKey: key)
        let sidecar = name + ".json"
        var removed: [String] = []
        forEachPayloadFolder { folder in
            let found = folder.files.filter { $0 == name || $0 == sidecar }
            guard !found.isEmpty else { return }
            if found.contains(sidecar), let bytes = Self.readFile(in: folder.fd, sidecar),
                let named = (try? JSONParser.parse(bytes))?["key"]?.stringValue, named != key
            {
                return
            }
            for file in found where Self.isRegularFile(file, in: folder.fd) && unlinkat(folder.fd, file, 0) == 0 {
                removed.append(folder.path(of: file))
            }
        }
        return removed.sorted()
    }

    /// The keys that have a record.
    public func recordedKeys() -> [String] {
        let folder = absolute("results")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }.compactMap { name in
            guard let data = FileManager.default.contents(atPath: "\(folder)/\(name)"),
                let record = try? JSONParser.parse([UInt8](data))
            else { return nil }
            return record["key"]?.stringValue
        }.sorted()
    }
}
