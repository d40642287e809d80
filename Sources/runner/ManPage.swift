import Foundation
import RunnerKinds
import RunnerKit

/// The man page runner(1) in mdoc, written from the command table that the parser and the help
/// read (`runner help --man`); the prose around the table is here.
enum ManPage {
    /// The date on the page: the day this text last changed, so that the output is the same on
    /// every machine.
    static let date = "November 27, 2026"

    static func render(commands: [CommandSpec]) -> String {
        var page: [String] = [
            ".Dd \(date)",
            ".Dt RUNNER 1",
            ".Os runner \(RunnerVersion.current)",
            ".Sh NAME",
            ".Nm runner",
            ".Nd run network jobs reliably: wait for the network, keep deadlines, write atomically",
            ".Sh SYNOPSIS",
        ]
        for command in commands {
            page.append(".Nm")
            page.append(".Cm \(command.name)")
            page += synopsis(command)
        }
        page.append(".Nm")
        page.append(".Fl \\-version")
        page += [
            ".Sh DESCRIPTION",
            text("runner fetches images, JSON trees and entries that job files describe."),
            text("A job is a small JSON object naming its kind and its URL; a job file holds one job, a batch {\"defaults\": {...}, \"jobs\": [...]}, an array of jobs, or JSON Lines, one job per line."),
            text("Each attempt waits for the network up to the job's deadline, at most one task per key runs at a time, and every payload and result record is written atomically to the output directory."),
            ".Pp",
            text("A FILE of"),
            ".Sq Ar -",
            text("is standard input: JSON or JSON Lines, told apart by content."),
            ".Pp",
            text("The subcommands:"),
            ".Bl -tag -width Ds",
        ]
        for command in commands {
            page.append(".It Cm \(command.name)")
            page.append(text(command.summary))
            var items: [String] = []
            for argument in command.arguments {
                items.append(".It Ar \(word(argument.name))")
                items.append(text(argument.help))
            }
            for option in command.options {
                items.append(".It Fl \\-\(option.name)" + (option.value.map { " Ar \(word($0))" } ?? ""))
                items.append(text(option.fullHelp))
            }
            if !items.isEmpty {
                page.append(".Bl -tag -width Ds")
                page += items
                page.append(".El")
            }
        }
        page.append(".El")
        page += [
            ".Sh ENVIRONMENT",
            ".Bl -tag -width Ds",
            ".It Ev \(EngineCommandOptions.httpEnvironmentVariable)",
            text("The HTTP client when --http is not given: curl (the default) or urlsession."),
            ".It Ev \(KindFolders.environmentVariable)",
            text("Folders of kind files, colon-separated, when no --kinds is given."),
            ".It Ev \(RequestConfig.environmentVariable)",
            text("The config file (hosts, headers, pacing, TLS) when no --config is given."),
            ".It Ev RUNNER_QUEUE",
            text("The PostgreSQL queue's URL when no --queue is given; it is withheld from hooks and executable kinds."),
            ".It Ev RUNNER_QUEUE_LEASE",
            text("Seconds of a queue watcher's lease on its claims instead of the default, for tests."),
            ".It Ev http_proxy , https_proxy , HTTPS_PROXY , all_proxy , ALL_PROXY , no_proxy , NO_PROXY",
            text("The proxy to send requests through and the hosts that bypass it, as curl reads them."),
            ".It Ev PATH",
            text("Where the program of an executable kind whose exec names no path is looked for."),
            ".It Ev NOTIFY_SOCKET , WATCHDOG_USEC , WATCHDOG_PID",
            text("Set by systemd for a Type=notify service: runner watch reports ready and feeds the watchdog."),
            ".It Ev MALLOC_ARENA_MAX",
            text("When set, overrides the two malloc arenas the runner asks glibc for."),
            ".It Ev NAME",
            text("Any variable a secret reference {env:NAME} in a header of the config or of a job names, read when the request is made."),
            ".El",
            ".Sh FILES",
            ".Bl -tag -width Ds",
            ".It Pa out/",
            text("The output directory: payloads, results/ (the last record of each key) and runs/ (one JSON Lines run log per run)."),
            ".It Pa spool/",
            text("The spool folder of runner watch and runner submit."),
            ".El",
            ".Sh EXIT STATUS",
            text("runner run exits"),
            ".Bl -tag -width Ds -compact",
            ".It 0",
            text("when every job, children included, ended succeeded or notModified (a child's notFound is an answer, not a failure), or no more failed than --max-failed allows;"),
            ".It 1",
            text("when some failed and some top-level job succeeded (or what the run wrote could not be made durable);"),
            ".It 2",
            text("for a usage error or an invalid job file (then nothing ran);"),
            ".It 3",
            text("when another run holds the output directory;"),
            ".It 4",
            text("when no top-level job succeeded: nothing was fetched (a refused token, the network down);"),
            ".It 129, 130, 143",
            text("when interrupted by SIGHUP, SIGINT or SIGTERM."),
            ".El",
            ".Pp",
            text("runner watch exits 0 once stopped by SIGTERM or SIGINT, 1 when its spool or queue cannot be used, 2 for a usage error."),
            ".Pp",
            text("runner submit --queue --wait exits as runner run does for the jobs of its batch: 0, 1 when some failed, 4 when none succeeded, 2 for a usage error."),
            ".Sh SIGNALS",
            ".Bl -tag -width Ds",
            ".It SIGTERM, SIGINT",
            text("runner watch takes no more work, lets running jobs end within --grace, and exits; runner run cancels its jobs and exits 128 + the signal."),
            ".It SIGHUP",
            text("runner watch opens --events and --metrics anew and reads the --listen-token file again (after a log rotation), and goes on; runner run is interrupted as by SIGTERM."),
            ".El",
            ".Sh EXAMPLES",
            text("Run a batch, then run again only the jobs that did not succeed:"),
            ".Bd -literal -offset indent",
            "runner run batch.jsonl",
            "runner run batch.jsonl \\-\\-resume out/runs/RUN\\-ID.jsonl",
            ".Ed",
            ".Pp",
            text("Read jobs from standard input:"),
            ".Bd -literal -offset indent",
            "generate\\-jobs | runner run \\-",
            ".Ed",
            ".Sh SEE ALSO",
            ".Xr curl 1",
        ]
        return page.joined(separator: "\n") + "\n"
    }

    /// The synopsis lines of one subcommand: its arguments, then each option in brackets.
    private static func synopsis(_ command: CommandSpec) -> [String] {
        var lines: [String] = []
        if let argument = command.arguments.first, command.positionals.max != 0 {
            let name = word(argument.name.replacingOccurrences(of: "…", with: ""))
            let many = command.positionals.max == nil
            let argument = "Ar \(name)" + (many ? " Ar ..." : "")
            lines.append(command.positionals.min > 0 ? ".\(argument)" : ".Op \(argument)")
        }
        for option in command.options {
            lines.append(".Op Fl \\-\(option.name)" + (option.value.map { " Ar \(word($0))" } ?? ""))
        }
        return lines
    }

    /// Text lines: one sentence a line (roff's rule), escapes for roff (backslash, a leading dot
    /// or quote), and non-ASCII as `\[uXXXX]`.
    static func text(_ text: String) -> String {
        sentences(text).map(line).joined(separator: "\n")
    }

    /// `text` cut after each `.`, `?` or `!` (and closing brackets or quotes) that a space follows.
    private static func sentences(_ text: String) -> [String] {
        var result: [String] = []
        var current = ""
        var afterStop = false
        for character in text {
            if character == " ", afterStop, !current.hasSuffix("e.g."), !current.hasSuffix("i.e.") {
                result.append(current)
                current = ""
                afterStop = false
                continue
            }
            current.append(character)
            if ".?!".contains(character) {
                afterStop = true
            } else if !")]\"'".contains(character) {
                afterStop = false
            }
        }
        if !current.isEmpty { result.append(current) }
        return result
    }

    private static func line(_ line: String) -> String {
        var out = ""
        for scalar in line.unicodeScalars {
            switch scalar {
            case "\\": out += "\\e"
            case "…": out += "..."
            case _ where scalar.isASCII: out.unicodeScalars.append(scalar)
            default:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            }
        }
        if out.hasPrefix(".") || out.hasPrefix("'") { out = "\\&" + out }
        return out
    }

    /// One argument of a macro line: escaped like text, quoted when it holds a space, and
    /// guarded with `\&` so that a word like `No` is not read as a macro.
    private static func word(_ text: String) -> String {
        let escaped = line(text).replacingOccurrences(of: "\"", with: "\\(dq")
        return escaped.contains(" ") ? "\"\\&\(escaped)\"" : "\\&" + escaped
    }
}
