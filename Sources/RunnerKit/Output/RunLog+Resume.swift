import Foundation
import Glibc

extension RunLog {
    /// A run log that cannot be read for `--resume`.
    package struct ResumeError: Error, Sendable, CustomStringConvertible {
        package var description: String
    }

    /// The keys that need no further run according to `path` (`runner run --resume`): a run
    /// log, or an output directory, whose `results/` hold the last record of each key. Either
    /// way, the top-level jobs whose last record is `succeeded` or `notModified`.
    ///
    /// - Records of child jobs (those with a `parent`) are passed over: a fan-out job is run
    ///   again as a whole when it did not end well, and its children that are current come back
    ///   `notModified` cheaply.
    /// - `duplicate` records are passed over: the job was refused because the same key was
    ///   running, so they say nothing of how that key ended.
    /// - A line that is not a JSON object with `key` and `status` (the last line of a log whose
    ///   run was killed while writing it) is passed over.
    /// - A `{"key", "settledIn"}` line (`appendSettled`) is a key a resumed run skipped: still
    ///   settled, so a chain of resumed runs keeps skipping it.
    package static func settledKeys(atPath path: String) throws(ResumeError) -> Set<String> {
        var info = stat()
        if stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR { return try settledKeys(inOutput: path) }
        var last: [String: Bool] = [:]
        var records = 0
        try forEachRecord(atPath: path) { record in
            guard let settled = settledness(of: record) else { return }
            records += 1
            if let settled { last[settled.key] = settled.isSettled }
        }
        guard records > 0 else {
            throw ResumeError(description: "\(path): holds no result records; is it a run log (out/runs/<run-id>.jsonl) or an output directory?")
        }
        return Set(last.compactMap { $0.value ? $0.key : nil })
    }

    /// What one record says of its key: nil when it is no record; `.some(nil)` when it is one
    /// that says nothing of how its key ended (a child's, a duplicate's).
    private static func settledness(of record: JSONValue) -> (key: String, isSettled: Bool)?? {
        guard let key = record["key"]?.stringValue else { return nil }
        if record["settledIn"]?.stringValue != nil { return .some((key, true)) }
        guard let statusName = record["status"]?.stringValue, let status = JobStatus(rawValue: statusName) else { return nil }
        guard record["parent"]?.stringValue == nil, status != .duplicate else { return .some(nil) }
        return .some((key, status.isSuccess))
    }

    /// The settled keys of an output directory: each key's last record, in `results/`.
    private static func settledKeys(inOutput folder: String) throws(ResumeError) -> Set<String> {
        let results = folder + "/results"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: results) else {
            throw ResumeError(description: "\(folder): has no readable results/; is it an output directory (--out)?")
        }
        var settled = Set<String>()
        var records = 0
        for name in names where name.hasSuffix(".json") && !name.hasPrefix(".") {
            guard let data = FileManager.default.contents(atPath: results + "/" + name),
                let record = try? JSONParser.parse([UInt8](data)), case .object = record,
                let found = settledness(of: record)
            else { continue }
            records += 1
            if let found, found.isSettled { settled.insert(found.key) }
        }
        guard records > 0 else {
            throw ResumeError(description: "\(folder): results/ holds no records yet; nothing to resume from")
        }
        return settled
    }

    /// Notes in this run's log that `keys` were skipped as settled in `source` (the `--resume`
    /// log or output directory), one `{"key", "settledIn"}` line each, in one write: resumed
    /// again, this log still counts them settled, however long the chain of runs.
    package func appendSettled(_ keys: some Sequence<String>, source: String) {
        var lines: [UInt8] = []
        for key in keys {
            JSONWriter.write(.object([("key", .string(key)), ("settledIn", .string(source))]), into: &lines)
            lines.append(0x0A)
        }
        append(lines: lines)
    }

    /// Calls `body` with each line of the run log at `path` that is a JSON object; a line that is
    /// not (the last line of a log whose run was killed while writing it) is passed over.
    static func forEachRecord(atPath path: String, _ body: (JSONValue) -> Void) throws(ResumeError) {
        guard let reader = LineReader(path: path) else {
            throw ResumeError(description: "\(path): cannot be read: \(String(cString: strerror(errno)))")
        }
        while true {
            let line: ArraySlice<UInt8>?
            do {
                line = try reader.next()
            } catch {
                throw ResumeError(description: "\(path): line \(reader.lineNumber + 1) is longer than 16 MiB; is it a run log?")
            }
            guard let line else { return }
            guard let record = try? JSONParser.parse(line), case .object = record else { continue }
            body(record)
        }
    }
}
