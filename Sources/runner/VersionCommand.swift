import RunnerKit

/// `runner version` and `runner --version`: the runner's version and its HTTP library's.
enum VersionCommand {
    static let spec: CommandSpec = CommandSpec(
        name: "version",
        summary: "Show the version of the runner, of its HTTP library (libcurl, TLS, HTTP/2), whether libpq is there for --queue and what hashes payloads.",

        run: { _ in print() })

    /// Four lines: `runner 0.1.0`; libcurl's version, TLS library and HTTP/2 support (or why
    /// libcurl cannot be loaded, and that URLSession is used instead); libpq's version (or that
    /// it cannot be loaded, so `--queue` is unavailable); what computes payloads' SHA-256.
    static var text: String {
        var text = "runner \(RunnerVersion.current)\n"
        switch CurlVersion.current() {
        case .success(let curl):
            text += curl.summary
        case .failure(let unavailable):
            text += "libcurl not usable: \(unavailable.reason); the HTTP client is urlsession"
        }
        text += "\n" + JobQueue.libraryLine
        text += "\n" + SHA256.implementation
        return text
    }

    static func print() -> Int32 {
        Console.out(text)
        return 0
    }
}
