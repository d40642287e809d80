/// What one successful attempt left in the output directory, as the engine committed it from
/// the kind's outcome: the numbers a record gives come from here, never from the kind.
struct Committed: Sendable {
    var status: JobStatus
    /// The file written, or after a 304 nil (the previous result carries forward).
    var output: String?
    var bytes: Int?
    var sha256: String?
    var httpStatus: Int?
    var details: [(key: String, value: JSONValue)]
    var children: ChildJobs
}

extension JobContext {
    /// Stores what the outcome names, atomically, and says what was stored.
    func commit(_ outcome: KindOutcome) throws -> Committed {
        switch outcome.stored {
        case .body(let response):
            let path = payloadPath(folder: outcome.folder, fileExtension: outcome.fileExtension)
            let payload = response.payload
            let digest = try payload.digest()  // hashed once: checked, then recorded
            try checkChecksum(digest)
            try store.commit(payload.file(), to: path)
            payload.committed()
            return Committed(
                status: .succeeded, output: path, bytes: payload.count, sha256: digest,
                httpStatus: response.head.status, details: outcome.details, children: outcome.children)
        case .bytes(let bytes, let httpStatus):
            let path = payloadPath(folder: outcome.folder, fileExtension: outcome.fileExtension)
            let digest = SHA256.hex(bytes)
            try checkChecksum(digest)
            try store.write(bytes, to: path)
            return Committed(
                status: .succeeded, output: path, bytes: bytes.count, sha256: digest,
                httpStatus: httpStatus, details: outcome.details, children: outcome.children)
        case .notModified:
            return Committed(
                status: .notModified, output: nil, bytes: nil, sha256: nil, httpStatus: 304,
                details: outcome.details, children: outcome.children)
        }
    }

    /// The job's `checksum`, if it has one, must be the digest of what would be stored: else the
    /// job fails (not retried: the same bytes would come again) and nothing is written.
    private func checkChecksum(_ digest: String) throws {
        guard let expected = job.checksum, expected != digest else { return }
        throw JobFailure(.failed, "the payload's checksum does not match: expected sha256:\(expected), got sha256:\(digest); nothing was written", reason: .checksum)
    }
}
