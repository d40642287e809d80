import Foundation
import Glibc

extension OutputStore {
    /// What `forget` removed for one key.
    package struct Forgotten: Sendable {
        package var key: String
        package var removed: [String]
    }

    /// Removes a key's record (with its validators), its payload and the bytes a cut transfer of
    /// it kept (`.partial-…` and its sidecar, wherever in the output directory), so the next run
    /// fetches afresh. Returns nil when the key has neither a record nor kept bytes. Every file is
    /// removed through its folder's descriptor, opened level by level from the output directory's
    /// without following links: a link on the way is never followed, and nothing outside the
    /// directory is touched. With `dryRun`, nothing is removed and the answer lists what would be;
    /// a payload in `sparing` (another key's record points to it) stays.
    package func forget(key: String, dryRun: Bool = false, sparing: Set<String> = []) -> Forgotten? {
        let recordPath = recordPath(forKey: key)
        let recordName = Self.recordFileName(forKey: key)
        let results = openExistingFolder("results")
        let hasRecord = results.map { Self.isRegularFile(recordName, in: $0.fd) } ?? false
        var removed: [String] = []
        if hasRecord, let output = readRecord(forKey: key)?["output"]?.stringValue,
            (try? OutputStore.validateOutput(output)) == output, !sparing.contains(output),
            dryRun ? isRegularFile(output) : removeFile(output)
        {
            removed.append(output)
        }
        removed += removeKeptPartial(forKey: key, dryRun: dryRun)
        if hasRecord, let results, dryRun || unlinkat(results.fd, recordName, 0) == 0 { removed.append(recordPath) }
        guard hasRecord || !removed.isEmpty else { return nil }
        return Forgotten(key: key, removed: removed)
    }

    /// Whether the regular file at `relativePath` exists, looked at through its folder's
    /// descriptor (a link, on the way or at the file, is not followed).
    func isRegularFile(_ relativePath: String) -> Bool {
        let name = relativePath.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? ""
        guard !name.isEmpty, name != ".", name != "..", let folder = openExistingFolder(Self.folder(of: relativePath)) else { return false }
        return Self.isRegularFile(name, in: folder.fd)
    }

    /// The keys of this output directory that are not in `included`: those with a record in
    /// `results/`, and those whose only trace is the bytes a cut transfer kept (named by the
    /// partial's sidecar); sorted. What a mirror's run or batch no longer lists, to `forget`.
    package func keys(notIn included: Set<String>) -> [String] {
        var found = Set(recordedKeys())
        forEachPayloadFolder { folder in
            for name in folder.files where name.hasPrefix(PartialDownload.prefix) && name.hasSuffix(".json") {
                guard Self.isRegularFile(name, in: folder.fd), let bytes = Self.readFile(in: folder.fd, name),
                    let key = (try? JSONParser.parse(bytes))?["key"]?.stringValue
                else { continue }
                found.insert(key)
            }
        }
        return found.subtracting(included).sorted()
    }

    /// The payloads the records of `keys` point to, by relative path: what forgetting other keys
    /// must leave, should two keys share an output.
    package func outputs(ofKeys keys: Set<String>) -> Set<String> {
        var outputs = Set<String>()
        for name in recordFileNames() {
            guard let record = readRecord(fileName: name), let key = record["key"]?.stringValue, keys.contains(key),
                let output = record["output"]?.stringValue
            else { continue }
            outputs.insert(output)
        }
        return outputs
    }

    /// Whether `name` in the folder open as `folder` is a regular file (a link is not followed).
    static func isRegularFile(_ name: String, in folder: Int32) -> Bool {
        var info = stat()
        return fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    /// Removes the bytes a cut transfer of `key` kept, and their sidecar, in any payload folder
    /// of the output directory (a pair whose sidecar names another key, whose name has the same
    /// hash, is left), each through the descriptor its folder was listed by; answers their
    /// relative paths, sorted (with `dryRun`, those it would remove).
    private func removeKeptPartial(forKey key: String, dryRun: Bool) -> [String] {
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
            for file in found where Self.isRegularFile(file, in: folder.fd) && (dryRun || unlinkat(folder.fd, file, 0) == 0) {
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
