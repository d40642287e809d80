import Foundation
import Glibc
import Synchronization

/// One connection to PostgreSQL through libpq: statements with text parameters (never values
/// spliced into SQL), LISTEN and its notifications. Used by one caller at a time (a lock sees to
/// it); its errors are one line and never hold the URL's password.
public final class PostgresConnection: @unchecked Sendable {  // the connection is used under `lock` only
    private let library: PostgresLibrary
    private let connection: PostgresLibrary.Connection
    private let lock = NSLock()
    /// The URL as it may be shown: without a password.
    public let display: String

    /// Connects to `url` (a libpq URI, `postgresql://user@host/db`, or `key=value` words).
    public init(url: String) throws(QueueError) {
        let library: PostgresLibrary
        switch PostgresLibrary.shared {
        case .success(let loaded): library = loaded
        case .failure(let error): throw error
        }
        self.library = library
        self.display = Self.withoutPassword(url)
        guard url.hasPrefix("postgresql://") || url.hasPrefix("postgres://") else {
            throw QueueError("--queue \(display): not a PostgreSQL URL (postgresql://USER@HOST/DATABASE)", usage: true)
        }
        guard let connection = library.connect(url) else { throw QueueError("--queue \(display): libpq could not allocate a connection") }
        guard library.status(connection) == PostgresLibrary.connectionOK else {
            let message = Self.firstLine(library.errorMessage(connection))
            library.finish(connection)
            throw QueueError("--queue \(display): \(Self.scrub(message, url: url))", usage: Self.isUsage(message))
        }
        self.connection = connection
        // libpq prints the server's notices on stderr ("relation … already exists, skipping").
        _ = try? query("SET client_min_messages TO warning")
    }

    deinit { library.finish(connection) }

    /// Runs one statement with `parameters` ($1, $2, … as text; nil is NULL) and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = []) throws(QueueError) -> [[String?]] {
        lock.lock()
        defer { lock.unlock() }
        return try unlockedQuery(sql, parameters)
    }

    private func unlockedQuery(_ sql: String, _ parameters: [String?]) throws(QueueError) -> [[String?]] {
        // A connection the server dropped (a restart) is made again, with the same settings.
        if library.status(connection) != PostgresLibrary.connectionOK {
            library.reset(connection)
            guard library.status(connection) == PostgresLibrary.connectionOK else {
                throw QueueError("the database cannot be reached: \(Self.firstLine(library.errorMessage(connection)))")
            }
            _ = try? unlockedQuery("SET client_min_messages TO warning", [])
        }
        let copies: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { copies.forEach { free($0) } }
        let values: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } }
        let result = values.withUnsafeBufferPointer { buffer in
            library.execParams(connection, sql, Int32(parameters.count), nil, buffer.baseAddress, nil, nil, 0)
        }
        defer { library.clear(result) }
        let status = library.resultStatus(result)
        guard status == PostgresLibrary.commandOK || status == PostgresLibrary.tuplesOK else {
            let message = result.map { Self.firstLine(library.resultErrorMessage($0)) } ?? Self.firstLine(library.errorMessage(connection))
            let state = library.resultErrorField(result, PostgresLibrary.sqlState).map { String(cString: $0) }
            throw QueueError(message.isEmpty ? "the database did not answer" : message, sqlState: state)
        }
        let rows = library.tuples(result)
        let columns = library.fields(result)
        var table: [[String?]] = []
        table.reserveCapacity(Int(rows))
        for row in 0..<rows {
            var values: [String?] = []
            values.reserveCapacity(Int(columns))
            for column in 0..<columns {
                if library.isNull(result, row, column) != 0 {
                    values.append(nil)
                } else {
                    values.append(library.value(result, row, column).map { String(cString: $0) } ?? "")
                }
            }
            table.append(values)
        }
        return table
    }

    /// Runs `body` inside one transaction: committed when it returns, rolled back when it throws.
    public func transaction<T>(_ body: (PostgresConnection) throws(QueueError) -> T) throws(QueueError) -> T {
        try query("BEGIN")
        do {
            let value = try body(self)
            try query("COMMIT")
            return value
        } catch {
            _ = try? query("ROLLBACK")
            throw error
        }
    }

    /// Waits up to `timeout` for notifications on the channels this connection LISTENs to, and
    /// returns them (channel, payload); empty when none came.
    public func notifications(waitingUpTo timeout: Duration) throws(QueueError) -> [(channel: String, payload: String)] {
        lock.lock()
        defer { lock.unlock() }
        guard library.status(connection) == PostgresLibrary.connectionOK else {
            throw QueueError("the database connection is down: \(Self.firstLine(library.errorMessage(connection)))")
        }
        var found = drainNotifications()
        if !found.isEmpty { return found }
        var descriptor = pollfd(fd: library.socket(connection), events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(timeout.inMilliseconds))
        guard ready > 0 else { return [] }
        guard library.consumeInput(connection) == 1 else {
            throw QueueError("the database connection was lost: \(Self.firstLine(library.errorMessage(connection)))")
        }
        found = drainNotifications()
        return found
    }

    /// libpq's `PGnotify`: `char *relname; int be_pid; char *extra; …`.
    private func drainNotifications() -> [(channel: String, payload: String)] {
        var found: [(String, String)] = []
        while let notification = library.notifies(connection) {
            let channel = notification.load(as: UnsafePointer<CChar>?.self).map { String(cString: $0) } ?? ""
            let extra = notification.load(fromByteOffset: MemoryLayout<UnsafeRawPointer>.stride * 2, as: UnsafePointer<CChar>?.self)
            found.append((channel, extra.map { String(cString: $0) } ?? ""))
            library.freemem(notification)
        }
        return found
    }

    // MARK: - Messages

    static func firstLine(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "" }
        let message = String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
        return message.split(separator: "\n").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? message
    }

    /// Refused passwords, unknown users or databases and malformed URLs are the command line's fault.
    static func isUsage(_ message: String) -> Bool {
        ["password", "authentication", "invalid", "does not exist", "missing \"=\"", "URI"].contains { message.contains($0) }
    }

    /// `postgresql://user:secret@host/db` shown as `postgresql://user:***@host/db`.
    public static func withoutPassword(_ url: String) -> String {
        guard let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].firstIndex(of: "@") else {
            return url.replacingOccurrences(of: #"password=[^&\s]*"#, with: "password=***", options: .regularExpression)
        }
        let userInfo = url[scheme.upperBound..<at]
        var shown = url
        if let colon = userInfo.firstIndex(of: ":") {
            shown = String(url[..<url.index(after: colon)]) + "***" + String(url[at...])
        }
        return shown.replacingOccurrences(of: #"password=[^&\s]*"#, with: "password=***", options: .regularExpression)
    }

    /// A message with the password (if it appears at all) blanked.
    static func scrub(_ message: String, url: String) -> String {
        guard let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].firstIndex(of: "@"),
            let colon = url[scheme.upperBound..<at].firstIndex(of: ":")
        else { return message }
        let password = String(url[url.index(after: colon)..<at])
        return password.isEmpty ? message : message.replacingOccurrences(of: password, with: "***")
    }
}
