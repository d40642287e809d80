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
    /// payload folder of the output directory (a sidecar naming another key, whose name has the
    /// same hash, is left with its partial).
    private func keptPartial(forKey key: String) -> [String] {
        let name = PartialDownload.name(forKey: key)
        let sidecar = name + ".json"
        var found: [String] = []
        var othersFolders = Set<String>()
        forEachPayloadFile { path, entry in
            guard entry == name || entry == sidecar else { return }
            found.append(path)
            if entry == sidecar, let bytes = Self.readFile(in: AT_FDCWD, absolute(path)),
                let named = (try? JSONParser.parse(bytes))?["key"]?.stringValue, named != key
            {
                othersFolders.insert(Self.folder(of: path))
            }
        }
        return found.filter { !othersFolders.contains(Self.folder(of: $0)) }.sorted()
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
