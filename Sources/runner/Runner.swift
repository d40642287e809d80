import Foundation
import RunnerKit

/// The command table and its dispatch.
enum Runner {
    static let commands: [CommandSpec] = [
        RunCommand.spec,
        ValidateCommand.spec,
        KindsCommand.spec,
        ForgetCommand.spec,
        PruneCommand.spec,
        DemoCommand.spec,
        FixtureServerCommand.spec,
        SpoolCommands.submit,
        WatchCommand.spec,
        SpoolCommands.cancel,
        SpoolCommands.status,
        QueueCommands.grantSpec,
        ScheduleCommands.spec,
        HelpCommand.spec,
        VersionCommand.spec,
        CompletionsCommand.spec,
        ConnectivityCommand.spec,
    ]

    static let overview = """
        OVERVIEW: Run network jobs (images, JSON trees, entries, image lists) reliably: wait for the \
        network, keep deadlines, one task per key, atomic results.

        USAGE: runner <subcommand> [options]

        SUBCOMMANDS:

        """

    static func main(_ arguments: [String]) async -> Int32 {
        guard let first = arguments.first else {
            Console.err(topHelp)
            return 2
        }
        switch first {
        case "-h", "--help":
            Console.out(topHelp)
            return 0
        case "--version":
            return VersionCommand.print()
        default:
            guard let spec = command(first) else { return unknown(first) }
            let rest = Array(arguments.dropFirst())
            if rest.contains(where: { $0 == "-h" || $0 == "--help" }) {
                Console.out(spec.helpText)
                return 0
            }
            do {
                return await spec.run(try spec.parse(rest))
            } catch {
                return usageError(error, spec: spec)
            }
        }
    }

    static func command(_ name: String) -> CommandSpec? { commands.first { $0.name == name } }

    /// The subcommands a user is shown: in the top help, the completions and the man page.
    static var visibleCommands: [CommandSpec] { commands.filter { !$0.hidden } }

    /// Options taken before any subcommand.
    static let topOptions: [CommandSpec.Option] = [
        .init(name: "version", value: nil, help: "Show the version of the runner and of its HTTP library."),
        .init(name: "help", value: nil, help: "Show help information."),
    ]

    static var topHelp: String {
        var text = overview
        for spec in visibleCommands { text += CommandSpec.row(spec.name, spec.summary) }
        text += "\nOPTIONS:\n"
        text += CommandSpec.row("--version", topOptions[0].help)
        text += CommandSpec.row("-h, --help", topOptions[1].help)
        text += "\n  See 'runner help <subcommand>' for detailed help."
        return text
    }

    static func unknown(_ name: String) -> Int32 {
        Console.error("Unknown subcommand '\(name)'")
        Console.err("Usage: runner <subcommand> [options]\n  See 'runner --help' for the subcommands.")
        return 2
    }

    static func usageError(_ error: any Error, spec: CommandSpec) -> Int32 {
        Console.error("\(error)")
        Console.err("Usage: runner \(spec.name) \(spec.usage)\n  See 'runner \(spec.name) --help' for more information.")
        return 2
    }
}
