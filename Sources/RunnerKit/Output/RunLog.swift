import Foundation
import Glibc
import Synchronization

/// `runs/<run-id>.jsonl`: one line per finished job of one run, appended as jobs end. The file
/// is made when the first line comes: a watcher started and stopped without a job leaves none.
package final class RunLog: Sendable {
    package let runID: String
    package let path: String
    /// The open file (-1 until the first line); a file that could not be made is tried again at
    /// the next line.
    private let fd = Mutex<Int32>(-1)

    package init(store: OutputStore, runID: String = Timestamp.runID()) throws {
        self.runID = runID
        let folder = try store.makeFolder("runs")
        self.path = "\(folder)/\(runID).jsonl"
    }

    deinit {
        let open = fd.withLock { $0 }
        if open >= 0 { close(open) }
    }

    /// Appends one record as one line, in a single write.
    package func append(_ result: JobResult) { append(record: result.json) }

    /// Appends a record already made JSON (`JobResult.json`).
    package func append(record: JSONValue) {
        append(records: CollectionOfOne(record))
    }

    /// Appends records already made JSON, one line each, in a single write: another process
    /// appending to the same file never splits a line.
    package func append(records: some Sequence<JSONValue>) {
        var lines: [UInt8] = []
        for record in records {
            JSONWriter.write(record, into: &lines)
            lines.append(0x0A)
        }
        append(lines: lines)
    }

    /// Appends lines already made (each ending in a newline) in a single write.
    func append(lines: [UInt8]) {
        guard !lines.isEmpty else { return }
        fd.withLock { fd in
            if fd < 0 { fd = path.withCString { open($0, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o644) } }
            guard fd >= 0 else { return }
            _ = lines.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
        }
    }
}
