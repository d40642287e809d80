import Glibc

/// The key's last good result, whose payload is still on disk: what a 304 carries forward, what
/// a failure falls back to (`stale`), and where the validators of a conditional request come from.
///
/// Read once per job (from the record writer's queue when the key's last record is not written
/// yet, else from `results/`), and only ever handled typed.
public struct PreviousResult: Sendable {
    /// The payload's path, relative to the output directory; the file was there when the result was
    /// read.
    public var output: String
    /// The payload's size in bytes, as its record gives it; nil when the record has none.
    public var bytes: Int?
    /// The payload's SHA-256 in lowercase hex, as its record gives it; nil when the record has
    /// none.
    public var sha256: String?
    /// The HTTP status its record gives: that of the response that brought the payload, 304 when
    /// one carried it forward, or a failure's when the record is `stale`.
    public var httpStatus: Int?
    /// The record's `details`, without the counts of its children: what a 304 carries forward.
    public var details: [(key: String, value: JSONValue)]
    /// Nil when the record had none, or when the payload on disk is not the size the record
    /// says (a crash between the payload and its record): then the next fetch is not conditional.
    package var validators: Validators?

    /// From a record read from `results/`: only a good one (succeeded, notModified, or a stale
    /// failure pointing at a good payload) whose payload is still in the store.
    init?(record: JSONValue, store: OutputStore) {
        guard let output = record["output"]?.stringValue,
            record["status"]?.stringValue.flatMap(JobStatus.init(rawValue:))?.isSuccess == true || record["stale"] == .bool(true),
            (try? OutputStore.validateOutput(output)) != nil
        else { return nil }
        self.init(
            output: output, bytes: record["bytes"]?.intValue, sha256: record["sha256"]?.stringValue,
            httpStatus: record["httpStatus"]?.intValue,
            details: record["details"]?.objectValue ?? [], validators: Validators(record: record), store: store)
    }

    /// From a result still on its way to disk.
    init?(result: JobResult, store: OutputStore) {
        guard let output = result.output, result.status.isSuccess || result.stale else { return nil }
        self.init(
            output: output, bytes: result.bytes, sha256: result.sha256, httpStatus: result.httpStatus,
            details: result.details, validators: result.validators, store: store)
    }

    private init?(
        output: String, bytes: Int?, sha256: String?, httpStatus: Int?, details: [(key: String, value: JSONValue)],
        validators: Validators?, store: OutputStore
    ) {
        guard let size = store.fileSize(output) else { return nil }
        self.output = output
        self.bytes = bytes
        self.sha256 = sha256
        self.httpStatus = httpStatus
        self.details = details.filter { $0.key != "children" }
        self.validators = bytes == size ? validators : nil
    }
}
