import Glibc

/// The few libpq functions the queue calls, loaded at run time with `dlopen` (as libcurl is), so
/// building the runner needs no PostgreSQL headers and a machine without libpq runs everything
/// but `--queue`.
struct PostgresLibrary: @unchecked Sendable {  // immutable; holds C function pointers only
    typealias Connection = OpaquePointer
    typealias Result = OpaquePointer

    let connect: @convention(c) (UnsafePointer<CChar>?) -> Connection?
    let status: @convention(c) (Connection?) -> Int32
    let errorMessage: @convention(c) (Connection?) -> UnsafePointer<CChar>?
    let finish: @convention(c) (Connection?) -> Void
    let reset: @convention(c) (Connection?) -> Void
    let execParams: @convention(c) (
        Connection?, UnsafePointer<CChar>?, Int32, UnsafePointer<UInt32>?, UnsafePointer<UnsafePointer<CChar>?>?,
        UnsafePointer<Int32>?, UnsafePointer<Int32>?, Int32
    ) -> Result?
    let resultStatus: @convention(c) (Result?) -> Int32
    let resultErrorMessage: @convention(c) (Result?) -> UnsafePointer<CChar>?
    let resultErrorField: @convention(c) (Result?, Int32) -> UnsafePointer<CChar>?
    let tuples: @convention(c) (Result?) -> Int32
    let fields: @convention(c) (Result?) -> Int32
    let value: @convention(c) (Result?, Int32, Int32) -> UnsafePointer<CChar>?
    let isNull: @convention(c) (Result?, Int32, Int32) -> Int32
    let clear: @convention(c) (Result?) -> Void
    let socket: @convention(c) (Connection?) -> Int32
    let consumeInput: @convention(c) (Connection?) -> Int32
    let notifies: @convention(c) (Connection?) -> UnsafeMutableRawPointer?
    let freemem: @convention(c) (UnsafeMutableRawPointer?) -> Void
    typealias NoticeProcessor = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void
    let setNoticeProcessor: @convention(c) (Connection?, NoticeProcessor?, UnsafeMutableRawPointer?) -> NoticeProcessor?
    /// libpq's version as a number, e.g. 150018 for 15.18.
    let version: Int32

    static let connectionOK: Int32 = 0
    static let commandOK: Int32 = 1
    static let tuplesOK: Int32 = 2
    /// `PG_DIAG_SQLSTATE`.
    static let sqlState: Int32 = 67

    /// libpq as this process can load it, or why it cannot.
    static let shared: Swift.Result<PostgresLibrary, QueueError> = load()

    /// What `runner --version` says of it.
    static var versionLine: String {
        switch shared {
        case .success(let library): "libpq \(library.version / 10000).\(library.version % 100) (for --queue)"
        case .failure(let error): "libpq: not loaded, so --queue is unavailable (\(error.message))"
        }
    }

    private static func load() -> Swift.Result<PostgresLibrary, QueueError> {
        var handle: UnsafeMutableRawPointer?
        for name in ["libpq.so.5", "libpq.so"] {
            handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)
            if handle != nil { break }
        }
        guard let handle else {
            return .failure(QueueError("libpq.so.5 could not be loaded (install libpq5: apt-get install libpq5)", usage: true))
        }
        var missing: [String] = []
        func symbol<F>(_ name: String, as type: F.Type) -> F? {
            guard let address = dlsym(handle, name) else {
                missing.append(name)
                return nil
            }
            return unsafeBitCast(address, to: type)
        }
        typealias Exec = @convention(c) (
            Connection?, UnsafePointer<CChar>?, Int32, UnsafePointer<UInt32>?, UnsafePointer<UnsafePointer<CChar>?>?,
            UnsafePointer<Int32>?, UnsafePointer<Int32>?, Int32
        ) -> Result?
        guard
            let connect = symbol("PQconnectdb", as: (@convention(c) (UnsafePointer<CChar>?) -> Connection?).self),
            let status = symbol("PQstatus", as: (@convention(c) (Connection?) -> Int32).self),
            let errorMessage = symbol("PQerrorMessage", as: (@convention(c) (Connection?) -> UnsafePointer<CChar>?).self),
            let finish = symbol("PQfinish", as: (@convention(c) (Connection?) -> Void).self),
            let reset = symbol("PQreset", as: (@convention(c) (Connection?) -> Void).self),
            let execParams = symbol("PQexecParams", as: Exec.self),
            let resultStatus = symbol("PQresultStatus", as: (@convention(c) (Result?) -> Int32).self),
            let resultErrorMessage = symbol("PQresultErrorMessage", as: (@convention(c) (Result?) -> UnsafePointer<CChar>?).self),
            let resultErrorField = symbol("PQresultErrorField", as: (@convention(c) (Result?, Int32) -> UnsafePointer<CChar>?).self),
            let tuples = symbol("PQntuples", as: (@convention(c) (Result?) -> Int32).self),
            let fields = symbol("PQnfields", as: (@convention(c) (Result?) -> Int32).self),
            let value = symbol("PQgetvalue", as: (@convention(c) (Result?, Int32, Int32) -> UnsafePointer<CChar>?).self),
            let isNull = symbol("PQgetisnull", as: (@convention(c) (Result?, Int32, Int32) -> Int32).self),
            let clear = symbol("PQclear", as: (@convention(c) (Result?) -> Void).self),
            let socket = symbol("PQsocket", as: (@convention(c) (Connection?) -> Int32).self),
            let consumeInput = symbol("PQconsumeInput", as: (@convention(c) (Connection?) -> Int32).self),
            let notifies = symbol("PQnotifies", as: (@convention(c) (Connection?) -> UnsafeMutableRawPointer?).self),
            let freemem = symbol("PQfreemem", as: (@convention(c) (UnsafeMutableRawPointer?) -> Void).self),
            let setNoticeProcessor = symbol(
                "PQsetNoticeProcessor", as: (@convention(c) (Connection?, NoticeProcessor?, UnsafeMutableRawPointer?) -> NoticeProcessor?).self),
            let libVersion = symbol("PQlibVersion", as: (@convention(c) () -> Int32).self)
        else {
            return .failure(QueueError("libpq lacks \(missing.joined(separator: ", "))", usage: true))
        }
        return .success(PostgresLibrary(
            connect: connect, status: status, errorMessage: errorMessage, finish: finish, reset: reset, execParams: execParams,
            resultStatus: resultStatus, resultErrorMessage: resultErrorMessage, resultErrorField: resultErrorField,
            tuples: tuples, fields: fields, value: value, isNull: isNull, clear: clear, socket: socket,
            consumeInput: consumeInput, notifies: notifies, freemem: freemem, setNoticeProcessor: setNoticeProcessor,
            version: libVersion()))
    }
}

/// A queue problem in one line. `usage`: the command line's fault (a malformed URL, a refused
/// password, no libpq), exit 2; otherwise the database's (unreachable, gone), exit 1.
package struct QueueError: Error, CustomStringConvertible, Sendable {
    package var message: String
    package var usage: Bool
    /// The server's SQLSTATE, when it sent one.
    package var sqlState: String?

    package init(_ message: String, usage: Bool = false, sqlState: String? = nil) {
        self.message = message
        self.usage = usage
        self.sqlState = sqlState
    }

    package var description: String { message }
}
