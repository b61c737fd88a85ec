package discordtest

import (
	"strconv"

	"github.com/bwmarrin/discordgo"
)

// DefaultBotPermissions are the permissions of the guild's @everyone role,
// and so of the bot, unless SetEveryonePermissions changes them: what the
// surface needs (View Channel, Send Messages, Read Message History, Add
// Reactions, Create Public Threads, Send Messages in Threads).
const DefaultBotPermissions = discordgo.PermissionViewChannel | discordgo.PermissionSendMessages |
	discordgo.PermissionReadMessageHistory | discordgo.PermissionAddReactions |
	discordgo.PermissionCreatePublicThreads | discordgo.PermissionSendMessagesInThreads

// SetEveryonePermissions sets the permissions of the guild's @everyone
// role (the bot has no other role), as GET /guilds/{id}/roles returns them.
func (s *Server) SetEveryonePermissions(perms int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.everyone = &perms
}

// rolesLocked serves GET /guilds/{id}/roles: the @everyone role, whose ID
// is the guild's.
func (s *Server) rolesLocked(guildID string) (any, *apiError) {
	if guildID != GuildID {
		return nil, &apiError{404, 10004, "Unknown Guild"}
	}
	perms := int64(DefaultBotPermissions)
	if s.everyone != nil {
		perms = *s.everyone
	}
	return []map[string]any{{"id": GuildID, "name": "@everyone", "position": 0, "permissions": strconv.FormatInt(perms, 10),
		"color": 0, "hoist": false, "managed": false, "mentionable": false}}, nil
}
