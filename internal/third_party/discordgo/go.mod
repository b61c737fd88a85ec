module github.com/bwmarrin/discordgo

go 1.13

require (
	github.com/gorilla/websocket v1.4.2
	golang.org/x/crypto v0.0.0-20210421170649-83a5a9bb288b
)
