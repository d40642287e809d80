import Glibc

extension RunLog {
    /// Every key that has a line in the run log at `path`: each job the run finished, children
    /// included, whatever its status, and each key a `--resume` run skipped as settled (its
    /// `{"key", "settledIn"}` line). What a mirror's run still lists, for `forget --not-in`.
    ///
    /// A line that is not a JSON object with a `key` (the last line of a log whose run was killed
    /// while writing it) is passed over. A log that cannot be read, or holds no key at all, is an
    /// error: an empty set would make every key of the output look dropped.
    package static func includedKeys(atPath path: String) throws(ResumeError) -> Set<String> {
        var info = stat()
        if stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            throw ResumeError(description: "\(path): is a folder; give one run log (out/runs/<run-id>.jsonl)")
        }
        var keys = Set<String>()
        try forEachRecord(atPath: path) { record in
            guard let key = record["key"]?.stringValue, record["status"]?.stringValue != nil || record["settledIn"]?.stringValue != nil
            else { return }
            keys.insert(key)
        }
        guard !keys.isEmpty else {
            throw ResumeError(description: "\(path): holds no result records; is it a run log (out/runs/<run-id>.jsonl)?")
        }
        return keys
    }
}
