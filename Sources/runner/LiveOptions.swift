import Foundation
import Glibc
import RunnerKit

/// `runner watch --listen HOST:PORT [--listen-token FILE]`: where the live page and API are served,
/// and the token that lets other addresses in and allows submitting and cancelling.
enum LiveOptions {
    static let listen = CommandOption<String?>.text(
        "listen", "HOST:PORT",
        help: "Serve a live page and an API at http://HOST:PORT/ (HOST an IP address or localhost; port 0: any free one, printed). Loopback only without --listen-token.")
    static let listenToken = CommandOption<String?>.text(
        "listen-token", "FILE",
        help: "The token (the file's first line) every request to --listen must carry as 'Authorization: Bearer TOKEN'; needed to serve another address, and to submit or cancel over HTTP.")

    static let specs = [listen.spec, listenToken.spec]

    struct Settings: Sendable {
        var host: String
        var port: UInt16
        var token: String?
        /// The file the token was read from (read again on SIGHUP).
        var tokenPath: String?
    }

    /// The settings of `--listen`, nil when it was not given.
    static func settings(_ arguments: ParsedArguments) throws(UsageError) -> Settings? {
        let tokenFile = try arguments[listenToken]
        guard let address = try arguments[listen] else {
            if tokenFile != nil { throw UsageError("--listen-token needs --listen") }
            return nil
        }
        var settings = try parse(address)
        if let tokenFile {
            settings.token = try readToken(tokenFile)
            settings.tokenPath = tokenFile
        }
        if settings.token == nil && !LiveServer.isLoopback(settings.host) {
            throw UsageError("--listen \(address): not a loopback address; serving it needs --listen-token FILE")
        }
        return settings
    }

    /// `HOST:PORT` or `[IPv6]:PORT`; `localhost` is 127.0.0.1.
    static func parse(_ text: String) throws(UsageError) -> Settings {
        let host: Substring
        let port: Substring
        if text.hasPrefix("["), let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") {
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(close, offsetBy: 2)...]
        } else if let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") {
            host = text[..<colon]
            port = text[text.index(after: colon)...]
        } else {
            throw UsageError("--listen \(text): expected HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080")
        }
        guard let number = UInt16(port) else { throw UsageError("--listen \(text): the port must be a number from 0 to 65535") }
        let address = host == "localhost" ? "127.0.0.1" : String(host)
        var v4 = in_addr()
        var v6 = in6_addr()
        guard inet_pton(AF_INET, address, &v4) == 1 || inet_pton(AF_INET6, address, &v6) == 1 else {
            throw UsageError("--listen \(text): HOST must be an IP address or localhost")
        }
        return Settings(host: address, port: number, token: nil)
    }

    /// The shortest token taken: a guess at 16 random characters is hopeless.
    static let minimumTokenLength = 16

    /// The first line of `path` (a trailing CR dropped, spaces trimmed): at least 16 characters,
    /// in a file that only its owner may read.
    static func readToken(_ path: String) throws(UsageError) -> String {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw UsageError("--listen-token \(path): cannot be read: \(String(cString: strerror(errno == 0 ? EINVAL : errno)))")
        }
        guard info.st_mode & 0o044 == 0 else {
            throw UsageError(
                "--listen-token \(path): others may read it (mode \(String(info.st_mode & 0o777, radix: 8))); make it the watcher's own: chmod 600 \(path)")
        }
        guard let data = FileManager.default.contents(atPath: path), data.count <= 4096 else {
            throw UsageError("--listen-token \(path): cannot be read, or is over 4 KiB")
        }
        let token = String(decoding: data, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).first
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        guard !token.isEmpty else { throw UsageError("--listen-token \(path): the file is empty; put the token on its first line") }
        guard token.count >= minimumTokenLength else {
            throw UsageError(
                "--listen-token \(path): the token has \(token.count) characters; use at least \(minimumTokenLength) (for example: openssl rand -hex 16 > \(path))")
        }
        // Hooks and executable kinds never see it, whatever variable the watcher was given it in.
        ChildEnvironment.withhold(token)
        return token
    }

    /// Starts the server for a watcher; the board hears the engine's events, the server its event lines.
    static func start(_ settings: Settings, site: LiveSite) throws(LiveServer.StartError) -> LiveServer {
        let server = LiveServer(host: settings.host, port: settings.port, token: settings.token, pages: LiveSite.pages) { site.handle($0) }
        try server.start()
        return server
    }
}
