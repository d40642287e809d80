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
    /// fetches afresh. Returns nil when the key has no record.
    public func forget(key: String) -> Forgotten? {
        let recordPath = recordPath(forKey: key)
        guard isConfined(recordPath), fileExists(recordPath) else { return nil }
        var removed: [String] = []
        if let output = readRecord(forKey: key)?["output"]?.stringValue,
            (try? OutputStore.validateOutput(output)) == output, isConfined(output), fileExists(output),
            unlink(absolute(output)) == 0
        {
            removed.append(output)
        }
        for partial in keptPartial(forKey: key) where unlink(absolute(partial)) == 0 { removed.append(partial) }
        if unlink(absolute(recordPath)) == 0 { removed.append(recordPath) }
        return Forgotten(key: key, removed: removed)
    }

    /// The relative paths of the bytes a cut transfer of `key` kept, and of their sidecar, in any
    /// folder of the output directory (a sidecar naming another key, whose name has the same
    /// hash, is left with its partial). Folders are told by their directory entries: links are
    /// never followed.
    private func keptPartial(forKey key: String) -> [String] {
        let name = PartialDownload.name(forKey: key)
        var found: [String] = []
        func walk(_ relative: String) {
            var folders: [String] = []
            var here: [String] = []
            FolderReader.forEachEntry(in: relative.isEmpty ? root : root + "/" + relative) { entry in
                guard let entryName = entry.name else { return }
                let path = relative.isEmpty ? entryName : relative + "/" + entryName
                if entry.isDirectory {
                    if !entryName.hasPrefix(".") && !(relative.isEmpty && (entryName == "results" || entryName == "runs")) { folders.append(path) }
                } else if entryName == name || entryName == name + ".json" {
                    here.append(path)
                }
            }
            if let sidecar = here.first(where: { $0.hasSuffix(".json") }),
                let bytes = Self.readFile(in: AT_FDCWD, absolute(sidecar)), let named = (try? JSONParser.parse(bytes))?["key"]?.stringValue,
                named != key
            {
                here.removeAll()
            }
            found.append(contentsOf: here)
            for folder in folders { walk(folder) }
        }
        walk("")
        return found.sorted()
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
