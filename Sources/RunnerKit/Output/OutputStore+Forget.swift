import Foundation
import Glibc

extension OutputStore {
    /// What `forget` removed for one key.
    public struct Forgotten: Sendable {
        public var key: String
        public var removed: [String]
    }

    /// Removes a key's record (with its validators) and its payload, so the next run fetches
    /// afresh. Returns nil when the key has no record.
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
        if unlink(absolute(recordPath)) == 0 { removed.append(recordPath) }
        return Forgotten(key: key, removed: removed)
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
