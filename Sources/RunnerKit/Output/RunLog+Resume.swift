import Glibc

extension RunLog {
    /// A run log that cannot be read for `--resume`.
    public struct ResumeError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// The keys that need no further run according to the run log at `path` (`runner run
    /// --resume`): the top-level jobs whose last record there is `succeeded` or `notModified`.
    ///
    /// - Records of child jobs (those with a `parent`) are passed over: a fan-out job is run
    ///   again as a whole when it did not end well, and its children that are current come back
    ///   `notModified` cheaply.
    /// - `duplicate` records are passed over: the job was refused because the same key was
    ///   running, so they say nothing of how that key ended.
    /// - A line that is not a JSON object with `key` and `status` (the last line of a log whose
    ///   run was killed while writing it) is passed over.
    public static func settledKeys(atPath path: String) throws(ResumeError) -> Set<String> {
        guard let reader = LineReader(path: path) else {
            throw ResumeError(description: "\(path): cannot be read: \(String(cString: strerror(errno)))")
        }
        var last: [String: Bool] = [:]
        var records = 0
        while true {
            let line: ArraySlice<UInt8>?
            do {
                line = try reader.next()
            } catch {
                throw ResumeError(description: "\(path): line \(reader.lineNumber + 1) is longer than 16 MiB; is it a run log?")
            }
            guard let line else { break }
            guard let record = try? JSONParser.parse(line), case .object = record,
                let key = record["key"]?.stringValue, let statusName = record["status"]?.stringValue,
                let status = JobStatus(rawValue: statusName)
            else { continue }
            records += 1
            guard record["parent"]?.stringValue == nil, status != .duplicate else { continue }
            last[key] = status.isSuccess
        }
        guard records > 0 else {
            throw ResumeError(description: "\(path): holds no result records; is it a run log (out/runs/<run-id>.jsonl)?")
        }
        return Set(last.compactMap { $0.value ? $0.key : nil })
    }
}
