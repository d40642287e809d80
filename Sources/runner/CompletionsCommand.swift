/// `runner completions bash|zsh|fish`: a completion script for the shell, from the command table.
enum CompletionsCommand {
    static let shells = ["bash", "zsh", "fish"]

    static let spec: CommandSpec = CommandSpec(
        name: "completions",
        summary: "Print a completion script for bash, zsh or fish (see README, Install).",
        synopsis: "SHELL",
        arguments: [("SHELL", "bash, zsh or fish.")],
        positionals: (1, 1),
        positionalCompletion: .words(shells),
        run: { arguments in
            let shell = arguments.positionals[0]
            let script = CompletionScript(commands: Runner.visibleCommands, topOptions: Runner.topOptions, kinds: KindsCommand.kindNames)
            switch shell {
            case "bash": Console.outRaw(script.bash)
            case "zsh": Console.outRaw(script.zsh)
            case "fish": Console.outRaw(script.fish)
            default:
                return Runner.usageError(UsageError("Unknown shell '\(shell)': give bash, zsh or fish"), spec: spec)
            }
            return 0
        })
}
