import Foundation
import Glibc
import Synchronization

/// One connection to PostgreSQL through libpq: statements with text parameters (never values
/// spliced into SQL), LISTEN and its notifications. Used by one caller at a time (a lock sees to
/// it); its errors are one line and never hold the URL's password.
package final class PostgresConnection: @unchecked Sendable {  // the connection is used under `lock` only
    private let library: PostgresLibrary
    private let connection: PostgresLibrary.Connection
    private let lock = NSLock()
    /// The URL as it may be shown: without a password.
    package let display: String

    /// Connects to `url` (a libpq URI, `postgresql://user@host/db`, or `key=value` words).
    package init(url: String) throws(QueueError) {
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
        if let problem = Self.passwordProblem(url) { throw QueueError("--queue: \(problem)", usage: true) }
        guard let connection = library.connect(url) else { throw QueueError("--queue \(display): libpq could not allocate a connection") }
        // What the server says outside an answer (a notice, "terminating connection due to
        // administrator command" before a restart) in the runner's words, not libpq's raw line.
        _ = library.setNoticeProcessor(connection, sayNotice, nil)
        guard library.status(connection) == PostgresLibrary.connectionOK else {
            let message = Self.firstLine(library.errorMessage(connection))
            library.finish(connection)
            throw QueueError("--queue \(display): \(Self.scrub(message, url: url))", usage: Self.isUsage(message))
        }
        self.connection = connection
        for setting in Self.sessionSettings { _ = try? query(setting) }
    }

    /// Set on every connection, and again when it is made anew. libpq prints the server's
    /// notices on stderr ("relation … already exists, skipping"): only warnings are asked for.
    /// And no JIT compilation: the queue's statements are short, but once a table holds tens of
    /// thousands of rows the planner's estimates for a claim pass `jit_above_cost`, and
    /// compiling it took 35 ms a claim where running it took 2 (a drain of 40 000 jobs ran at a
    /// fifth of its speed from there on). A server without JIT refuses the setting; that is
    /// ignored.
    static let sessionSettings = ["SET client_min_messages TO warning", "SET jit = off"]

    deinit { library.finish(connection) }

    /// Runs one statement with `parameters` ($1, $2, … as text; nil is NULL) and returns its rows.
    @discardableResult
    package func query(_ sql: String, _ parameters: [String?] = []) throws(QueueError) -> [[String?]] {
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
            for setting in Self.sessionSettings { _ = try? unlockedQuery(setting, []) }
        }
        // A text value cannot hold NUL (and a C string ends at one, cutting the statement's
        // parameter short): any byte a server sent is stored, NUL shown as U+FFFD.
        let copies: [UnsafeMutablePointer<CChar>?] = parameters.map { parameter in
            parameter.map { text in strdup(text.utf8.contains(0) ? text.replacingOccurrences(of: "\0", with: "\u{FFFD}") : text) }
        }
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
    package func transaction<T>(_ body: (PostgresConnection) throws(QueueError) -> T) throws(QueueError) -> T {
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
    package func notifications(waitingUpTo timeout: Duration) throws(QueueError) -> [(channel: String, payload: String)] {
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

    /// Where the URL's user information ends: at its last `@` (a host holds none, so even a
    /// password with an unencoded `@`, `/` or `?` ends there; an `@` in the query would make
    /// more of the URL count as the password, which hides more, never less), with the `://`
    /// before it.
    private static func userInfo(_ url: String) -> (scheme: Range<String.Index>, at: String.Index)? {
        guard let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].lastIndex(of: "@") else { return nil }
        return (scheme, at)
    }

    /// `postgresql://user:secret@host/db` shown as `postgresql://user:***@host/db`; a password
    /// holding `@`, `/` or `?` unencoded is hidden whole too. `password=` in the query is hidden.
    package static func withoutPassword(_ url: String) -> String {
        var shown = url
        if let (scheme, at) = userInfo(url), let colon = url[scheme.upperBound..<at].firstIndex(of: ":") {
            shown = String(url[..<url.index(after: colon)]) + "***" + String(url[at...])
        }
        return shown.replacingOccurrences(of: #"password=[^&\s]*"#, with: "password=***", options: .regularExpression)
    }

    /// Where the password lies in `url`'s UTF-8 bytes (to blank it in place), if it has one.
    package static func passwordBytes(in url: String) -> Range<Int>? {
        guard let (scheme, at) = userInfo(url), let colon = url[scheme.upperBound..<at].firstIndex(of: ":") else { return nil }
        let start = url.utf8.distance(from: url.startIndex, to: url.index(after: colon))
        let end = url.utf8.distance(from: url.startIndex, to: at)
        return start < end ? start..<end : nil
    }

    /// Why the URL's password cannot be read as written, naming the problem and never the text:
    /// a character that must be percent-encoded (`@`, `/`, `?` and `#` are the URL's own).
    static func passwordProblem(_ url: String) -> String? {
        guard let (scheme, at) = userInfo(url), let colon = url[scheme.upperBound..<at].firstIndex(of: ":") else { return nil }
        let password = url[url.index(after: colon)..<at]
        guard password.contains(where: { "@/?#".contains($0) }) else { return nil }
        return "the password in the URL holds a character that must be percent-encoded (@ / ? # as %40 %2F %3F %23); "
            + "better, keep it out of the URL: in ~/.pgpass or PGPASSWORD"
    }

    /// A message with the password (if it appears at all, as written or decoded) blanked.
    static func scrub(_ message: String, url: String) -> String {
        guard let (scheme, at) = userInfo(url), let colon = url[scheme.upperBound..<at].firstIndex(of: ":") else { return message }
        let password = String(url[url.index(after: colon)..<at])
        guard !password.isEmpty else { return message }
        var scrubbed = message.replacingOccurrences(of: password, with: "***")
        if let decoded = password.removingPercentEncoding, !decoded.isEmpty {
            scrubbed = scrubbed.replacingOccurrences(of: decoded, with: "***")
        }
        return scrubbed
    }
}

/// libpq's notice processor for every connection: the server's words as one line on stderr,
/// prefixed as the runner's own are, control characters escaped.
private let sayNotice: PostgresLibrary.NoticeProcessor = { _, message in
    guard let message else { return }
    let text = String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
        .replacingOccurrences(of: "  ", with: " ")
    guard !text.isEmpty else { return }
    let line = Array(("runner: the queue's database says: " + Printable.escaped(text) + "\n").utf8)
    _ = line.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
}
