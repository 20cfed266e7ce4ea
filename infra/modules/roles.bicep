// What the app's identity may do, each role on the one resource that needs it. The ids are Azure's
// built-in role definitions, the same in every tenant.
param identityPrincipalId string
param storageAccountName string
param keyVaultName string
param appInsightsName string
param bundlesContainerName string

@description('Object id of whoever runs azd; empty for nobody.')
param userPrincipalId string = ''

// Storage Blob Data Owner: the host's blobs (keys, timer locks), the deployment package, and the
// app's receipts and bundles. Its data actions are containers/blobs/*, which covers the blob index
// tags the receipts use (blobs/tags/read, blobs/tags/write) and the tag query (blobs/filter/action);
// Storage Blob Data Contributor does not include the tag actions.
var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
// Storage Table Data Contributor: the idempotency, governance and ledger tables.
var storageTableDataContributor = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
// Storage Queue Data Contributor: the Functions host's own queues, and the app's contact queues,
// which the app's queue client reaches (AzureWebJobsStorage__queueServiceUri) signed in as this same
// identity, as its table and blob clients are: it sends, receives and deletes their messages.
var storageQueueDataContributor = '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
// Key Vault Secrets User: reads secret values, which the Key Vault references need.
var keyVaultSecretsUser = '4633458b-17de-408a-b874-0445c86b69e6'
// Monitoring Metrics Publisher: sends telemetry to Application Insights with an Entra ID token.
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'
// Storage Blob Data Contributor: lets the person deploying upload bundle files, in that container only.
var storageBlobDataContributor = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource bundles 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' existing = {
  name: '${storageAccountName}/default/${bundlesContainerName}'
}

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource blobOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, identityPrincipalId, storageBlobDataOwner)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwner)
    principalId: identityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource tableContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, identityPrincipalId, storageTableDataContributor)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributor)
    principalId: identityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource queueContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, identityPrincipalId, storageQueueDataContributor)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageQueueDataContributor)
    principalId: identityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource secretsUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, identityPrincipalId, keyVaultSecretsUser)
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', keyVaultSecretsUser)
    principalId: identityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource metricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, identityPrincipalId, monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: identityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// No principalType: azd may run as a person or as a service principal.
resource bundlesUploader 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(userPrincipalId)) {
  name: guid(bundles.id, userPrincipalId, storageBlobDataContributor)
  scope: bundles
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataContributor)
    principalId: userPrincipalId
  }
}
