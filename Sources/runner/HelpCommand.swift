/// `runner help [SUBCOMMAND] [--man]`: the top help, a subcommand's help, or the man page.
enum HelpCommand {
    static let man = CommandOption<Bool>.flag("man", help: "Print the man page, runner(1), made from the same table as this help.")

    static let spec: CommandSpec = CommandSpec(
        name: "help",
        summary: "Show the help of the runner or of a subcommand, or print the man page.",
        synopsis: "[SUBCOMMAND]",
        arguments: [("SUBCOMMAND", "The subcommand to explain.")],
        options: [
            man.spec,
        ],
        positionals: (0, 1),
        positionalCompletion: .subcommands,
        run: { arguments in
            if (try? arguments[man]) == true {
                guard arguments.positionals.isEmpty else {
                    return Runner.usageError(UsageError("--man prints the whole man page; give no subcommand"), spec: spec)
                }
                Console.outRaw(ManPage.render(commands: Runner.visibleCommands))
                return 0
            }
            guard let name = arguments.positionals.first else {
                Console.out(Runner.topHelp)
                return 0
            }
            guard let command = Runner.command(name) else { return Runner.unknown(name) }
            Console.out(command.helpText)
            return 0
        })
}
